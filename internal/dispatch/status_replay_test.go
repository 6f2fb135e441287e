package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// reconnectWith is reconnect with the agent's StatusAcks offer.
func (h *harness) reconnectWith(tok, id, resume string, statusAcks bool, inFlight ...protocol.InFlightJob) *client {
	h.t.Helper()
	c := h.dial()
	c.auth(tok)
	c.id = id
	c.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: uuid.NewString(), AgentID: id,
		Labels: []string{"linux"}, InFlightJobs: inFlight, ResumeToken: resume, StatusAcks: statusAcks})
	ack, ok := c.read().(*protocol.RegisterAck)
	if !ok || ack.StatusAcks != statusAcks {
		h.t.Fatalf("register.ack %+v, want statusAcks %v", ack, statusAcks)
	}
	c.resume = ack.ResumeToken
	return c
}

// An agent that negotiated StatusAcks is not acknowledged a terminal status
// the node could not store: the socket closes, so the agent reconnects and
// sends it again.
func TestUnstoredTerminalStatusIsNotAcknowledged(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: time.Minute}, nil)
	h.killBetweenWrites()
	tok := h.staticToken()
	a := h.reconnectWith(tok, "a1", "", true)
	wait.For(t, 5*time.Second, "registration drain", func() bool { return h.d.queue.registering.Load() == 0 })
	j := h.job("linux")
	h.enqueue(j)
	jd := a.dispatch()
	a.status(jd, status.JobRunning)
	a.status(jd, status.JobSuccess)
	if code, frames := a.closed(); int(code) != protocol.CloseInternalError {
		t.Fatalf("socket after an unstored terminal status: close %d, frames %+v; want %d and no ack", code, frames, protocol.CloseInternalError)
	} else {
		for _, f := range frames {
			if _, ok := f.(*protocol.JobStatusAck); ok {
				t.Fatalf("an unstored status was acknowledged: %+v", frames)
			}
		}
	}
}

// killBetweenWrites makes h's node die, as far as the store can tell,
// between completing a job's queue entry and writing the job.
func (h *harness) killBetweenWrites() {
	h.d.frame.mu.Lock()
	h.d.frame.events = killedAfterQueue{h.ev}
	h.d.frame.mu.Unlock()
}

// errNodeKilled stands for the process dying in the middle of applying a
// terminal status.
var errNodeKilled = errors.New("node killed")

// killedAfterQueue is the events recorder of a node that is killed right
// after it completed a job's queue entry and before it wrote the job's
// terminal status (the window in which a node logged "job finished" and
// died 0.7 ms later): JobFinished writes nothing.
type killedAfterQueue struct{ *events }

func (k killedAfterQueue) JobFinished(context.Context, string, status.Job, string, time.Time) error {
	return errNodeKilled
}

// A node applies a job's terminal status in two writes: the queue entry,
// then the job. Killed between them, it leaves the queue entry completed
// and the job running. The agent reconnects to another node and sends the
// terminal status again: that node applies it, and the job ends with the
// agent's status instead of timed_out_stale minutes later.
func TestReplayedTerminalStatusFinishesJobTheKilledNodeDidNot(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: time.Minute}, nil)
	// The first node's tracker dies before writing the job's status.
	h.killBetweenWrites()
	tok, a, jd := runningOnStatic(t, h)
	a.send(&protocol.JobStatus{Type: protocol.TypeJobStatus, RunID: jd.RunID, JobID: jd.JobID, State: status.JobFailed,
		Data: &protocol.JobStatusData{Error: "step 1 exited with 3"}})
	wait.For(t, 5*time.Second, "the queue entry completed by the first node", func() bool {
		return h.entry(jd.JobID).Status == store.QueueCompleted
	})
	if got := h.getJob(jd.JobID).Status; got != status.JobRunning {
		t.Fatalf("job %s after the first node died mid-way, want still running", got)
	}
	a.ws.CloseNow() // the node is gone; its socket with it

	// Another node (here: a new dispatcher over the same database).
	h2 := h.restarted(Config{}, Deps{})
	// The agent re-registers listing the finished job and replays its
	// terminal status (agent.replayRecent).
	b := h2.reconnectWith(tok, "a1", a.resume, true, protocol.InFlightJob{JobID: jd.JobID, RunID: jd.RunID})
	b.send(&protocol.JobStatus{Type: protocol.TypeJobStatus, RunID: jd.RunID, JobID: jd.JobID, State: status.JobFailed,
		Data: &protocol.JobStatusData{Error: "step 1 exited with 3"}})
	if ack, ok := b.read().(*protocol.JobStatusAck); !ok || ack.JobID != jd.JobID || ack.State != status.JobFailed {
		t.Fatalf("answer to the replayed status: %+v, want job.status.ack of %s failed", ack, jd.JobID)
	}
	if got := h.getJob(jd.JobID).Status; got != status.JobFailed {
		t.Fatalf("job %s when its status was acknowledged, want failed", got)
	}
	if got := h2.ev.finishedOf(jd.JobID); len(got) != 1 || got[0] != status.JobFailed {
		t.Fatalf("finish events on the second node: %v, want one failed", got)
	}
}
