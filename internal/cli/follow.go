package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// maxEventLine bounds one line of an event stream (a JSON-encoded log
// line); the agent keeps log lines far below it.
const maxEventLine = 16 << 20

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	ID, Name, Data string
}

// errStreamEnded reports a stream that closed without its "end" event
// (the orchestrator restarted, or the stream reached its maximum age).
var errStreamEnded = errors.New("stream closed")

// follower follows a run over the admin API's event streams: the run's
// event stream says which jobs and steps exist and when the run is over;
// each selected step log has its own stream, resumed after any break with
// Last-Event-ID (the line offset), so every line is printed exactly once
// even across an orchestrator restart.
type follower struct {
	a      *app
	c      *Client
	hc     *http.Client
	runID  string
	raw    bool
	retry  time.Duration
	match  func(jobID, name, base string) bool
	stepOK func(idx int) bool

	mu      sync.Mutex
	started map[string]bool // "jobId/index" streams already followed
	names   map[string]string
	wg      sync.WaitGroup
	errOnce sync.Once
	err     error
	cancel  context.CancelFunc
	warned  bool
	merge   *merger
}

// followLogs prints the selected logs as they are written, until the run
// is finished and every selected log was read to its end. A lost
// connection is retried (from retry up to 5 s between attempts) for as
// long as it takes; a refusal (4xx) ends the command with its error.
func (a *app) followLogs(ctx context.Context, c *Client, runID string, jobs []apitypes.JobView, jobSel string, step int, stepSet, raw bool, retry time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	selected := map[string]bool{}
	for _, j := range jobs {
		selected[j.JobID] = true
	}
	f := &follower{a: a, c: c, hc: &http.Client{Transport: c.HTTP.Transport}, runID: runID, raw: raw,
		retry: max(retry, 50*time.Millisecond), started: map[string]bool{}, names: map[string]string{}, cancel: cancel,
		// Jobs that appear later (none should: a run's jobs are created
		// with it) are matched by id, name or base name.
		match: func(id, name, base string) bool {
			return jobSel == "" || selected[id] || id == jobSel || name == jobSel || base == jobSel
		},
		stepOK: func(idx int) bool { return !stepSet || idx == step },
	}
	f.merge = newMerger(a.out())
	stopMerge := f.merge.run()
	defer stopMerge()
	for _, j := range jobs {
		f.names[j.JobID] = j.JobName
		f.startStream(ctx, j.JobID, -1, "setup")
		for _, s := range j.Steps {
			f.startStream(ctx, j.JobID, s.StepIndex, s.StepName)
		}
	}
	f.watchRun(ctx)
	f.wg.Wait()
	stopMerge()
	return f.err
}

func (f *follower) fail(err error) {
	f.errOnce.Do(func() { f.err = err; f.cancel() })
}

// startStream follows one step log once.
func (f *follower) startStream(ctx context.Context, jobID string, idx int, stepName string) {
	if !f.stepOK(idx) {
		return
	}
	key := jobID + "/" + strconv.Itoa(idx)
	f.mu.Lock()
	if f.started[key] {
		f.mu.Unlock()
		return
	}
	f.started[key] = true
	name := stepName
	if name == "" {
		name = strconv.Itoa(idx)
	}
	jobName, stepLabel := f.names[jobID], name
	if idx < 0 {
		stepLabel = "setup"
	}
	label := "[" + jobName + "/" + name + "] "
	f.mu.Unlock()
	path := fmt.Sprintf("%s/runs/%s/jobs/%s/steps/%d/logs/stream", apitypes.AdminPrefix, url.PathEscape(f.runID), url.PathEscape(jobID), idx)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.stream(ctx, path, func(ev sseEvent) bool {
			if ev.Name != "line" {
				return ev.Name != "end"
			}
			var l apitypes.LineEvent
			if json.Unmarshal([]byte(ev.Data), &l) != nil {
				return true
			}
			f.merge.add(key, l.TS, formatLogLine(f.a.json, f.raw, label, logLineJSON{JobID: jobID, Job: jobName,
				Step: idx, StepName: stepLabel, TS: l.TS, Stream: l.Stream, Msg: l.Msg}))
			return true
		})
		if err != nil && ctx.Err() == nil {
			f.fail(err)
		}
	}()
}

// watchRun reads the run's event stream: new jobs and steps start their
// log streams; "end" (the run and all its jobs are terminal) returns.
func (f *follower) watchRun(ctx context.Context) {
	path := fmt.Sprintf("%s/runs/%s/events", apitypes.AdminPrefix, url.PathEscape(f.runID))
	err := f.stream(ctx, path, func(ev sseEvent) bool {
		switch ev.Name {
		case "job":
			var j struct {
				JobID       string `json:"jobId"`
				JobName     string `json:"jobName"`
				BaseJobName string `json:"baseJobName"`
			}
			if json.Unmarshal([]byte(ev.Data), &j) == nil && f.match(j.JobID, j.JobName, j.BaseJobName) {
				f.mu.Lock()
				f.names[j.JobID] = j.JobName
				f.mu.Unlock()
				f.startStream(ctx, j.JobID, -1, "setup")
			}
		case "step":
			var s struct {
				JobID     string `json:"jobId"`
				StepIndex int    `json:"stepIndex"`
				StepName  string `json:"stepName"`
			}
			if json.Unmarshal([]byte(ev.Data), &s) == nil {
				f.mu.Lock()
				_, known := f.names[s.JobID]
				f.mu.Unlock()
				if known {
					f.startStream(ctx, s.JobID, s.StepIndex, s.StepName)
				}
			}
		case "end":
			return false
		}
		return true
	})
	if err != nil && ctx.Err() == nil {
		f.fail(err)
	}
}

// stream reads path's event stream, calling fn for each event until fn
// returns false (done: nil) or a 4xx answer (that error). Any other break
// reconnects with Last-Event-ID set to the last id seen.
func (f *follower) stream(ctx context.Context, path string, fn func(sseEvent) bool) error {
	lastID := ""
	delay := f.retry
	for {
		done, connected, err := f.streamOnce(ctx, path, &lastID, fn)
		if done {
			return nil
		}
		var he *HTTPError
		if errors.As(err, &he) && he.Status >= 400 && he.Status < 500 && he.Status != http.StatusTooManyRequests {
			return err
		}
		if connected {
			delay = f.retry
		}
		if err != nil && !errors.Is(err, errStreamEnded) {
			f.mu.Lock()
			if !f.warned {
				f.warned = true
				fmt.Fprintf(f.a.io.Stderr, "kici-admin: lost the orchestrator (%v); reconnecting…\n", err)
			}
			f.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// streamOnce makes one connection. done is true once fn said so; connected
// reports whether the orchestrator answered 200.
func (f *follower) streamOnce(ctx context.Context, path string, lastID *string, fn func(sseEvent) bool) (done, connected bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.c.BaseURL+path, nil)
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if f.c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+f.c.Token)
	}
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, false, &HTTPError{Status: resp.StatusCode, Message: errorMessage(resp.StatusCode, body)}
	}
	f.mu.Lock()
	f.warned = false
	f.mu.Unlock()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" { // dispatch
			if ev.Name != "" || len(data) > 0 {
				ev.Data = strings.Join(data, "\n")
				if ev.Name == "" {
					ev.Name = "message"
				}
				if ev.ID != "" {
					*lastID = ev.ID
				}
				if !fn(ev) {
					return true, true, nil
				}
			}
			ev, data = sseEvent{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
		}
	}
	if err := sc.Err(); err != nil {
		return false, true, err
	}
	return false, true, errStreamEnded
}

// mergeWindow is how long a followed line may wait so that lines of
// several steps print in the order they were logged: streams are read
// concurrently, and one can deliver a line logged later than one still
// on its way in another.
const mergeWindow = 300 * time.Millisecond

// merger prints the lines of several streams merged by log timestamp:
// each stream's lines keep their order; across streams, a line is printed
// once it has waited mergeWindow, the earliest-logged head first.
type merger struct {
	mu     sync.Mutex
	w      io.Writer
	queues map[string][]pending
	order  []string
}

type pending struct {
	ts      int64
	arrived time.Time
	text    string
}

func newMerger(w io.Writer) *merger { return &merger{w: w, queues: map[string][]pending{}} }

func (m *merger) add(stream string, ts int64, text string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.queues[stream]; !ok {
		m.order = append(m.order, stream)
	}
	m.queues[stream] = append(m.queues[stream], pending{ts: ts, arrived: time.Now(), text: text})
}

// flush prints every due line (all lines when all is set).
func (m *merger) flush(all bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for {
		best := ""
		for _, k := range m.order {
			q := m.queues[k]
			if len(q) == 0 || (!all && time.Since(q[0].arrived) < mergeWindow) {
				continue
			}
			if best == "" || q[0].ts < m.queues[best][0].ts {
				best = k
			}
		}
		if best == "" {
			break
		}
		b.WriteString(m.queues[best][0].text)
		m.queues[best] = m.queues[best][1:]
	}
	if b.Len() > 0 {
		_, _ = m.w.Write([]byte(b.String()))
	}
}

// run flushes due lines every 50 ms until the returned stop is called,
// which prints whatever is left (it may be called more than once).
func (m *merger) run() (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				m.flush(false)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-finished
			m.flush(true)
		})
	}
}
