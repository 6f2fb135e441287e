// Package runstream serves Server-Sent Events (the WHATWG HTML "server-sent
// events" format) for one run: its run, job and step status changes, and
// one step's log lines. The admin API mounts both streams; the web UI's
// live pages and `kici-admin runs logs --follow` read them.
//
// A log stream is resumable: every line event carries as its id the line
// offset after it, so a client that reconnects with that id in
// Last-Event-ID (or ?cursor=) gets the next line, neither repeating nor
// skipping one. Streams read the store and the log store, which are the
// source of truth on every node, so a stream can be resumed on another
// orchestrator, or on the same one after a restart.
package runstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// LogReader reads a step's log by line offset: up to limit lines from
// cursor, and the offset after the last one returned (logstore.FS). A log
// that does not exist yet reads as empty.
type LogReader interface {
	Read(runID, jobID string, stepIndex, cursor, limit int) ([]protocol.LogLine, int, error)
}

// Defaults of a Streamer.
const (
	// DefaultPoll is how often a stream looks for new state or lines.
	DefaultPoll = 250 * time.Millisecond
	// DefaultMaxAge ends a stream after this long; the client reconnects
	// (EventSource does by itself) and is authenticated again, so a
	// revoked token stops reading within this bound.
	DefaultMaxAge = time.Minute
	// heartbeat is the interval of SSE comment lines that keep proxies
	// from closing an idle stream.
	heartbeat = 15 * time.Second
	// linesPerRead is the page size of one log read.
	linesPerRead = 1000
	// retryMs is the reconnection delay suggested to EventSource clients.
	retryMs = 1000
)

// Streamer serves the two streams. Zero Poll and MaxAge take the defaults.
type Streamer struct {
	Store  store.Store
	Logs   LogReader
	Poll   time.Duration
	MaxAge time.Duration
}

func (s *Streamer) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return DefaultPoll
}

func (s *Streamer) maxAge() time.Duration {
	if s.MaxAge > 0 {
		return s.MaxAge
	}
	return DefaultMaxAge
}

// sse writes events to a flushing response.
type sse struct {
	w        http.ResponseWriter
	f        http.Flusher
	lastBeat time.Time // last flush
}

func start(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "Streaming not supported")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", retryMs)
	f.Flush()
	return &sse{w: w, f: f, lastBeat: time.Now()}, true
}

// event writes one event; id "" writes none. data is JSON, which never
// contains a raw newline, so it is one data line.
func (e *sse) event(id, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	sb.WriteString("event: " + name + "\ndata: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	_, err = e.w.Write([]byte(sb.String()))
	return err
}

func (e *sse) comment(s string) error {
	_, err := fmt.Fprintf(e.w, ": %s\n\n", s)
	return err
}

func (e *sse) flush() { e.f.Flush(); e.lastBeat = time.Now() }

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// StepFinished reports whether a step's log can grow no more: its job is
// terminal, or (idx ≠ -1, the setup log) the step itself is. Read it
// before reading lines, so "finished" never hides lines appended between
// the two reads.
func StepFinished(ctx context.Context, st store.Store, job *store.Job, idx int) (bool, error) {
	if job.Status.IsTerminal() {
		return true, nil
	}
	if idx == protocol.JobLogStepIndex {
		return false, nil
	}
	steps, err := st.ListSteps(ctx, job.ID)
	if err != nil {
		return false, err
	}
	for _, s := range steps {
		if s.StepIndex == idx && s.Status.IsTerminal() {
			return true, nil
		}
	}
	return false, nil
}

// LineEvent is the data of a "line" event of a step's log stream; the
// clients decode it as apitypes.LineEvent.
type LineEvent = apitypes.LineEvent

// EndEvent is the data of the final "end" event of a log stream: the step
// is finished and every line up to Cursor was sent.
type EndEvent struct {
	Cursor int `json:"cursor"`
}

// StepLogs serves GET …/runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream:
// "line" events from the offset in Last-Event-ID (else ?cursor=, else 0),
// then "end" once the step is finished and its log fully sent. 400 for a
// bad index or offset, 404 for an unknown run or a job of another run, 503
// without a log store. The caller has checked permission and scope.
func (s *Streamer) StepLogs(w http.ResponseWriter, r *http.Request) {
	idx, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || idx < protocol.ContainerBuildStepIndex {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid step index %q: must be an integer ≥ -2 (-1 = job setup, -2 = container image build)", r.PathValue("i")))
		return
	}
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		raw = r.URL.Query().Get("cursor")
	}
	cursor := 0
	if raw != "" {
		if cursor, err = strconv.Atoi(raw); err != nil || cursor < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid cursor %q: must be a line offset ≥ 0", raw))
			return
		}
	}
	ctx := r.Context()
	run, job, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	if s.Logs == nil {
		writeError(w, http.StatusServiceUnavailable, "Log storage not available")
		return
	}
	ev, ok := start(w)
	if !ok {
		return
	}
	deadline := time.Now().Add(s.maxAge())
	for {
		job, err = s.Store.GetJob(ctx, job.ID)
		if err != nil {
			return
		}
		finished, err := StepFinished(ctx, s.Store, job, idx)
		if err != nil {
			return
		}
		lines, next, err := s.Logs.Read(run.ID, job.ID, idx, cursor, linesPerRead)
		if errors.Is(err, os.ErrNotExist) {
			lines, next, err = nil, cursor, nil
		}
		if err != nil {
			return
		}
		for i, l := range lines {
			n := cursor + i
			if ev.event(strconv.Itoa(n+1), "line", LineEvent{N: n, TS: l.Timestamp, Stream: string(l.Stream), Msg: l.Text}) != nil {
				return
			}
		}
		cursor = next
		if len(lines) > 0 {
			ev.flush()
		}
		if len(lines) == linesPerRead {
			continue // more is waiting
		}
		if finished {
			_ = ev.event(strconv.Itoa(cursor), "end", EndEvent{Cursor: cursor})
			ev.flush()
			return
		}
		wctx, stopWait := context.WithCancel(ctx)
		alive := ev.wait(ctx, deadline, s.poll(), s.lineStored(wctx, run.ID, job.ID, idx, cursor))
		stopWait()
		if !alive {
			return
		}
	}
}

// LogWaiter is a LogReader that can also wait for a line beyond a cursor
// (logstore.Store.Wait: the PostgreSQL store wakes on an append through any
// node), so a stream sends new lines at once instead of at its next poll.
type LogWaiter interface {
	Wait(ctx context.Context, runID, jobID string, stepIndex int, cursor int) error
}

// lineStored returns a channel closed once the step's log holds more than
// cursor lines, or nil when the log store cannot wait (the stream polls).
// The wait ends with ctx.
func (s *Streamer) lineStored(ctx context.Context, runID, jobID string, idx, cursor int) <-chan struct{} {
	w, ok := s.Logs.(LogWaiter)
	if !ok {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		if w.Wait(ctx, runID, jobID, idx, cursor) == nil {
			close(ch)
		}
	}()
	return ch
}

// wait sleeps one poll interval (or until woken is closed) before the
// stream looks again, sending a
// heartbeat comment when the stream was quiet too long. It reports false
// when the stream must end: the client left, a write failed, or the
// stream reached its maximum age.
func (e *sse) wait(ctx context.Context, deadline time.Time, poll time.Duration, woken <-chan struct{}) bool {
	if time.Now().After(deadline) {
		return false
	}
	if time.Since(e.lastBeat) > heartbeat {
		if e.comment("ping") != nil {
			return false
		}
		e.flush()
	}
	select {
	case <-ctx.Done():
		return false
	case <-woken: // a new line (nil: never)
		return true
	case <-time.After(poll):
		return true
	}
}

// loadJob fetches {runId} and {jobId} (which must belong to the run) or
// answers 404/500.
func (s *Streamer) loadJob(w http.ResponseWriter, r *http.Request) (*store.Run, *store.Job, bool) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return nil, nil, false
	}
	job, err := s.Store.GetJob(r.Context(), r.PathValue("jobId"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && job.RunID != run.ID) {
		writeError(w, http.StatusNotFound, "Job not found")
		return nil, nil, false
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, "Internal server error")
		return nil, nil, false
	}
	return run, job, true
}

func (s *Streamer) loadRun(w http.ResponseWriter, r *http.Request) (*store.Run, bool) {
	run, err := s.Store.GetRun(r.Context(), r.PathValue("runId"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Run not found")
		return nil, false
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, "Internal server error")
		return nil, false
	}
	return run, true
}
