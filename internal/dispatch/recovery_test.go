package dispatch

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/testutil/wait"
)

// runningOnStatic starts a job on static agent a1 and returns the agent's
// token, the client and the dispatch.
func runningOnStatic(t *testing.T, h *harness) (string, *client, *protocol.JobDispatch) {
	t.Helper()
	tok := h.staticToken()
	a := h.agent("a1", tok, "linux")
	j := h.job("linux")
	h.enqueue(j)
	jd := a.dispatch()
	a.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "job running", func() bool { return h.getJob(j.ID).Status == status.JobRunning })
	return tok, a, jd
}

// reconnect registers agent id again on a new socket, presenting resume
// (the previous session's resume token, "" for none).
func (h *harness) reconnect(tok, id, resume string, inFlight ...protocol.InFlightJob) *client {
	h.t.Helper()
	return h.reconnectWith(tok, id, resume, false, inFlight...)
}

// restarted starts a new dispatcher over h's database (the restarted
// orchestrator) with cfg and deps (Events is its own recorder) and returns
// its harness.
func (h *harness) restarted(cfg Config, deps Deps) *harness {
	h.t.Helper()
	return h.restartedWithLogs(cfg, deps, h.logs)
}

// restartedWithLogs is restarted whose dispatcher stores log lines in logs
// (the new harness's logs field is set only when logs is the recording
// double).
func (h *harness) restartedWithLogs(cfg Config, deps Deps, logs LogSink) *harness {
	h.t.Helper()
	ev := newEvents(h.st)
	deps.Events = ev
	d2 := New(cfg, h.st, h.aa, logs, nil, nil, deps)
	srv := httptest.NewServer(d2)
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d2.Shutdown(ctx)
		srv.Close()
	})
	recorded, _ := logs.(*logSink)
	return &harness{t: h.t, st: h.st, aa: h.aa, d: d2, ev: ev, logs: recorded, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
}

func (h *harness) startedCount(id string) int {
	h.ev.mu.Lock()
	defer h.ev.mu.Unlock()
	return h.ev.started[id]
}

// TestStaticAgentReclaimsJobWithinRecoveryWindow: a static agent whose
// socket drops leaves its job recovering; re-registering with the job in
// inFlightJobs reclaims it and its later statuses land.
func TestStaticAgentReclaimsJobWithinRecoveryWindow(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: time.Minute}, nil)
	tok, a, jd := runningOnStatic(t, h)
	a.ws.CloseNow()
	wait.For(t, 5*time.Second, "job recovering", func() bool { return h.getJob(jd.JobID).Status == status.JobRecovering })
	b := h.reconnect(tok, "a1", a.resume, protocol.InFlightJob{JobID: jd.JobID, RunID: jd.RunID})
	wait.For(t, 5*time.Second, "reclaim reported as started", func() bool { return h.startedCount(jd.JobID) == 2 })
	b.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "terminal status accepted", func() bool {
		got := h.ev.finishedOf(jd.JobID)
		return len(got) == 1 && got[0] == status.JobSuccess
	})
}

// TestStaticAgentNotBackWithinWindowFailsJob proves, for
// static agents, that a job on an agent that never returns fails after the
// recovery window instead of staying running.
func TestStaticAgentNotBackWithinWindowFailsJob(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: 300 * time.Millisecond, RedriveInterval: 50 * time.Millisecond}, nil)
	h.d.Start(context.Background())
	_, a, jd := runningOnStatic(t, h)
	a.ws.CloseNow()
	wait.For(t, 5*time.Second, "job failed after the window", func() bool { return len(h.ev.finishedOf(jd.JobID)) == 1 })
	h.ev.mu.Lock()
	msg := h.ev.errs[jd.JobID]
	h.ev.mu.Unlock()
	if got := h.ev.finishedOf(jd.JobID)[0]; got != status.JobFailed || !strings.Contains(msg, "did not reconnect within the recovery window") {
		t.Errorf("job ended %s %q", got, msg)
	}
}

// TestAgentRestartWithoutJobFailsItAtOnce proves that an agent that
// re-registers with the same identity and an empty in-flight set had
// restarted; its jobs fail immediately (no waiting for a timeout).
func TestAgentRestartWithoutJobFailsItAtOnce(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: time.Hour}, nil)
	tok, a, jd := runningOnStatic(t, h)
	a.ws.CloseNow()
	wait.For(t, 5*time.Second, "job recovering", func() bool { return h.getJob(jd.JobID).Status == status.JobRecovering })
	h.reconnect(tok, "a1", a.resume)
	wait.For(t, 5*time.Second, "job failed at once", func() bool { return len(h.ev.finishedOf(jd.JobID)) == 1 })
	h.ev.mu.Lock()
	msg := h.ev.errs[jd.JobID]
	h.ev.mu.Unlock()
	if !strings.Contains(msg, "re-registered without the job") {
		t.Errorf("error %q", msg)
	}
}

// TestRestartedDispatcherLetsAgentReclaimRecoveringJob: a job left
// recovering by the previous orchestrator process is reclaimed by id when
// its agent registers with the new one, and its later statuses land.
func TestRestartedDispatcherLetsAgentReclaimRecoveringJob(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: time.Minute}, nil)
	tok, a, jd := runningOnStatic(t, h)
	a.ws.CloseNow()
	wait.For(t, 5*time.Second, "job recovering", func() bool { return h.getJob(jd.JobID).Status == status.JobRecovering })

	h2 := h.restarted(Config{}, Deps{})
	b := h2.reconnect(tok, "a1", a.resume, protocol.InFlightJob{JobID: jd.JobID, RunID: jd.RunID})
	wait.For(t, 5*time.Second, "reclaimed job reported started", func() bool { return h2.startedCount(jd.JobID) == 1 })
	b.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "terminal status accepted by the new process", func() bool {
		got := h2.ev.finishedOf(jd.JobID)
		return len(got) == 1 && got[0] == status.JobSuccess
	})
}
