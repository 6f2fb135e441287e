package dispatch

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// foreignFrames are the job-scoped frames an agent could forge for a job
// it does not own: an ack, a running and a success status, a step result
// and log lines (without and with a LogAcks offset). Five frames: the
// fifth ownership violation closes the sender's socket with 1001.
func foreignFrames(jd *protocol.JobDispatch) []any {
	off := int64(0)
	exit := 0
	return []any{
		&protocol.JobAck{Type: protocol.TypeJobAck, RunID: jd.RunID, JobID: jd.JobID, Timestamp: time.Now().UnixMilli()},
		&protocol.JobStatus{Type: protocol.TypeJobStatus, MessageID: uuid.NewString(), RunID: jd.RunID, JobID: jd.JobID,
			State: status.JobSuccess, Timestamp: time.Now().UnixMilli()},
		&protocol.StepStatus{Type: protocol.TypeStepStatus, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0,
			StepName: "deploy", State: status.StepSuccess, Data: &protocol.StepStatusData{ExitCode: &exit}},
		&protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0, Seq: 0,
			Lines: []protocol.LogLine{{Text: "injected"}}},
		&protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0, Seq: 1,
			Offset: &off, Lines: []protocol.LogLine{{Text: "injected with offset"}}},
	}
}

// attackJob sends foreignFrames for jd on c and waits for the socket to
// close (which also proves every frame was read and refused).
func attackJob(t *testing.T, c *client, jd *protocol.JobDispatch) {
	t.Helper()
	for _, m := range foreignFrames(jd) {
		c.send(m)
	}
	if code, _ := c.closed(); code != protocol.CloseGoingAway {
		t.Fatalf("intruder closed with %d, want 1001 after five ownership violations", code)
	}
}

// assertUntouched fails if anything the intruder sent reached the job:
// its status, agent, queue entry, steps or log.
func assertUntouched(t *testing.T, h *harness, ev *events, logs *logSink, jobID, owner string) {
	t.Helper()
	j := h.getJob(jobID)
	if j.Status != status.JobRunning || j.AgentID != owner {
		t.Fatalf("job after the attack: status %s agent %q, want running on %s", j.Status, j.AgentID, owner)
	}
	if e := h.entry(jobID); e.Status != store.QueueDispatched || e.AgentID != owner {
		t.Fatalf("queue entry after the attack: %+v", e)
	}
	if got := ev.finishedOf(jobID); len(got) != 0 {
		t.Fatalf("intruder finished the job: %v", got)
	}
	assertNothingStored(t, ev, logs, "intruder")
}

// assertNothingStored fails if a step status or a log line reached ev or
// logs (who names the sender in the message).
func assertNothingStored(t *testing.T, ev *events, logs *logSink, who string) {
	t.Helper()
	ev.mu.Lock()
	steps := len(ev.steps)
	ev.mu.Unlock()
	logs.mu.Lock()
	lines := strings.Join(logs.lines, ",")
	logs.mu.Unlock()
	if steps != 0 || lines != "" {
		t.Fatalf("%s stored %d step statuses and log lines %q", who, steps, lines)
	}
}

// TestForeignAgentFramesRefusedSameNode: an agent with its own valid token,
// connected to the same orchestrator, forges job.ack, job.status,
// step.status and log.chunk for a job dispatched to another agent. Every
// frame is refused (the socket closes with 1001), the job stays running on
// its owner with no step or log from the intruder, and the owner still
// finishes it.
func TestForeignAgentFramesRefusedSameNode(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	owner := h.agent("a-owner", h.staticToken())
	intruder := h.agent("z-intruder", h.staticToken(), "other")
	j := h.job()
	h.enqueue(j)
	jd := owner.dispatch()
	owner.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "job running", func() bool { return h.getJob(j.ID).Status == status.JobRunning })

	attackJob(t, intruder, jd)
	assertUntouched(t, h, h.ev, h.logs, j.ID, "a-owner")

	owner.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "owner finished the job", func() bool {
		got := h.ev.finishedOf(j.ID)
		return len(got) == 1 && got[0] == status.JobSuccess
	})
}

// TestForeignAgentFramesRefusedOtherNode is the cluster case: a second
// orchestrator (its own dispatcher, on the same database) holds the
// intruder's socket, while the job runs on an agent of the first. The
// second node knows nothing of the job but what the database says
// (running, on another agent), and refuses every frame.
func TestForeignAgentFramesRefusedOtherNode(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	owner := h.agent("a-owner", h.staticToken())
	j := h.job()
	h.enqueue(j)
	jd := owner.dispatch()
	owner.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "job running", func() bool { return h.getJob(j.ID).Status == status.JobRunning })

	// Node B: same store, its own dispatcher, events and log sink.
	evB := newEvents(h.st)
	logsB := &logSink{}
	dB := New(Config{}, h.st, h.aa, logsB, nil, nil, Deps{Events: evB, NodeID: "node-b"})
	srv := httptest.NewServer(dB)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dB.Shutdown(ctx)
		srv.Close()
	})
	hB := &harness{t: t, st: h.st, aa: h.aa, d: dB, ev: evB, logs: logsB,
		url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
	intruder := hB.agent("z-intruder", h.staticToken(), "other")

	attackJob(t, intruder, jd)
	assertUntouched(t, h, evB, logsB, j.ID, "a-owner")
	assertUntouched(t, h, h.ev, h.logs, j.ID, "a-owner")
}

// TestImpostorOfFinishedAgentCannotWriteItsJobs: agent "a1" finishes a
// job and goes away. Another token's holder registers the id "a1" (it is
// not live, so a new session is opened) and forges frames for the finished
// job: within the 30 s grace, after it, and once this process no longer
// tracks the job (when the store alone says "a1" ran it). Every frame is an
// ownership violation and none reaches the job.
func TestImpostorOfFinishedAgentCannotWriteItsJobs(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	a := h.agent("a1", h.staticToken())
	j := h.job()
	h.enqueue(j)
	jd := a.dispatch()
	a.status(jd, status.JobRunning)
	a.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "job finished", func() bool { return len(h.ev.finishedOf(j.ID)) == 1 })
	a.ws.CloseNow()
	wait.For(t, 5*time.Second, "a1 gone", func() bool { return len(h.d.Agents()) == 0 })

	for _, when := range []string{"within the grace", "after the grace", "untracked"} {
		h.d.reg.mu.Lock()
		switch when {
		case "after the grace":
			if js := h.d.reg.jobs[j.ID]; js != nil {
				js.doneAt = time.Now().Add(-2 * ownershipGrace)
			}
		case "untracked":
			delete(h.d.reg.jobs, j.ID)
		}
		h.d.reg.mu.Unlock()
		attackJob(t, h.agent("a1", h.staticToken()), jd)
		wait.For(t, 5*time.Second, "impostor gone", func() bool { return len(h.d.Agents()) == 0 })
		assertNothingStored(t, h.ev, h.logs, "impostor "+when)
		if got := h.ev.finishedOf(j.ID); len(got) != 1 || got[0] != status.JobSuccess {
			t.Fatalf("%s: job finished %v, want once, success", when, got)
		}
	}
}
