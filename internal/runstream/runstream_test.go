package runstream

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

type fixture struct {
	st     store.Store
	logs   *logstore.FS
	srv    *httptest.Server
	run    *store.Run
	job    *store.Job
	stream string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	f := &fixture{st: st, logs: logstore.NewFS(t.TempDir())}
	now := time.Now().UTC()
	f.run = &store.Run{ID: "r-1", WorkflowName: "ci", Status: status.RunRunning, Provider: "local", OrgID: "o", CreatedAt: now, StartedAt: &now}
	f.job = &store.Job{ID: "j-1", RunID: "r-1", JobName: "build", BaseJobName: "build", Status: status.JobRunning, CreatedAt: now, StartedAt: &now}
	if err := st.CreateRun(ctx, f.run, []*store.Job{f.job}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertStep(ctx, &store.Step{RunID: "r-1", JobID: "j-1", StepIndex: 0, StepName: "s", Status: status.StepRunning, StartedAt: &now}); err != nil {
		t.Fatal(err)
	}
	s := &Streamer{Store: st, Logs: f.logs, Poll: 10 * time.Millisecond}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs/{runId}/events", s.RunEvents)
	mux.HandleFunc("GET /runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream", s.StepLogs)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.stream = f.srv.URL + "/runs/r-1/jobs/j-1/steps/0/logs/stream"
	return f
}

func (f *fixture) appendLines(t *testing.T, from, to int) {
	t.Helper()
	var ls []protocol.LogLine
	for i := from; i <= to; i++ {
		ls = append(ls, protocol.LogLine{Timestamp: int64(i), Stream: protocol.StreamStdout, Text: fmt.Sprintf("l%d", i)})
	}
	if err := f.logs.Append("r-1", "j-1", 0, ls); err != nil {
		t.Fatal(err)
	}
}

type event struct{ id, name, data string }

// read collects events until n have arrived or the stream ends.
func read(t *testing.T, url, lastID string, n int) []event {
	t.Helper()
	return readThen(t, url, lastID, n, -1, nil)
}

// readThen is read that starts then, in its own goroutine, once the first
// k events have arrived: the change then makes is seen live, not in the
// stream's opening snapshot or backlog.
func readThen(t *testing.T, url, lastID string, n, k int, then func()) []event {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []event
	var cur event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && len(out) < n {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
				if len(out) == k {
					go then()
				}
			}
			cur = event{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func TestStepLogsResumeFromLastEventIDAndEnd(t *testing.T) {
	f := newFixture(t)
	f.appendLines(t, 1, 5)
	evs := read(t, f.stream, "", 3)
	if len(evs) != 3 || evs[2].id != "3" || evs[2].name != "line" || !strings.Contains(evs[2].data, `"msg":"l3"`) || !strings.Contains(evs[2].data, `"n":2`) {
		t.Fatalf("first three events: %+v", evs)
	}
	// Reconnecting with the last id gets line 4 next, not line 3 again.
	evs = readThen(t, f.stream, "3", 100, 2, func() { // after lines 4 and 5
		f.appendLines(t, 6, 7)
		now := time.Now().UTC()
		if err := f.st.UpsertStep(context.Background(), &store.Step{RunID: "r-1", JobID: "j-1", StepIndex: 0, StepName: "s", Status: status.StepSuccess, CompletedAt: &now}); err != nil {
			t.Error(err) // not the test's goroutine: readThen runs this beside its read
		}
	})
	var msgs []string
	for _, e := range evs {
		msgs = append(msgs, e.name+":"+e.id)
	}
	if got := strings.Join(msgs, ","); got != "line:4,line:5,line:6,line:7,end:7" {
		t.Fatalf("resumed stream: %s", got)
	}
	// A finished step's stream from its end is just "end".
	if evs := read(t, f.stream+"?cursor=7", "", 10); len(evs) != 1 || evs[0].name != "end" {
		t.Fatalf("stream of a finished step from its end: %+v", evs)
	}
}

func TestStepLogsRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	for url, want := range map[string]int{
		f.stream + "?cursor=-1":                               400,
		f.stream + "?cursor=x":                                400,
		f.srv.URL + "/runs/r-1/jobs/j-1/steps/-3/logs/stream": 400,
		f.srv.URL + "/runs/nope/jobs/j-1/steps/0/logs/stream": 404,
		f.srv.URL + "/runs/r-1/jobs/nope/steps/0/logs/stream": 404,
		f.srv.URL + "/runs/nope/events":                       404,
	} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", url, resp.StatusCode, want)
		}
	}
}

func TestRunEventsSnapshotChangesAndEnd(t *testing.T) {
	f := newFixture(t)
	evs := readThen(t, f.srv.URL+"/runs/r-1/events", "", 100, 3, func() { // after the run, job and step snapshot
		ctx := context.Background()
		now := time.Now().UTC()
		// t.Error, not Fatal: readThen runs this beside its read.
		if err := f.st.UpsertStep(ctx, &store.Step{RunID: "r-1", JobID: "j-1", StepIndex: 0, StepName: "s", Status: status.StepSuccess, CompletedAt: &now}); err != nil {
			t.Error(err)
		}
		if _, err := f.st.UpdateJobStatus(ctx, "j-1", nil, status.JobSuccess, store.JobUpdate{CompletedAt: &now}); err != nil {
			t.Error(err)
		}
		if _, err := f.st.UpdateRunStatus(ctx, "r-1", nil, status.RunSuccess, store.RunUpdate{CompletedAt: &now}); err != nil {
			t.Error(err)
		}
	})
	var got []string
	for _, e := range evs {
		status := e.data[strings.Index(e.data, `"status":"`)+10:]
		got = append(got, e.name+":"+status[:strings.IndexByte(status, '"')])
	}
	want := "run:running,job:running,step:running,"
	if s := strings.Join(got, ","); !strings.HasPrefix(s, want) || !strings.HasSuffix(s, "end:success") ||
		!strings.Contains(s, "job:success") || !strings.Contains(s, "step:success") || !strings.Contains(s, "run:success") {
		t.Fatalf("run events: %s", s)
	}
}
