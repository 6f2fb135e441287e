package dispatch

import (
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
)

// TestImpostorOfFinishedAgentCannotWriteItsJobs: agent "a1" (token T1)
// finishes a job and goes away. Another token's holder registers the id
// "a1" (the id is not live, so a new session is opened) and forges a step
// result and log lines for the finished job: within the 30 s grace, after
// it, and once this process no longer tracks the job (when the store alone
// says "a1" ran it). None of it reaches the job.
func TestImpostorOfFinishedAgentCannotWriteItsJobs(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	a := h.agent("a1", h.staticToken())
	j := h.job()
	h.enqueue(j)
	jd := a.dispatch()
	a.status(jd, "running")
	a.status(jd, "success")
	eventually(t, "job finished", func() bool { return len(h.ev.finishedOf(j.ID)) == 1 })
	a.ws.CloseNow()
	eventually(t, "a1 gone", func() bool { return len(h.d.Agents()) == 0 })

	exit := 0
	for _, when := range []string{"within the grace", "after the grace", "untracked"} {
		h.d.mu.Lock()
		switch when {
		case "after the grace":
			if js := h.d.jobs[j.ID]; js != nil {
				js.doneAt = time.Now().Add(-2 * ownershipGrace)
			}
		case "untracked":
			delete(h.d.jobs, j.ID)
		}
		h.d.mu.Unlock()
		imp := h.agent("a1", h.staticToken())
		imp.send(&protocol.StepStatus{Type: protocol.TypeStepStatus, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0,
			StepName: "deploy", State: "success", Data: &protocol.StepStatusData{ExitCode: &exit}})
		imp.send(&protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0,
			Seq: 7, Lines: []protocol.LogLine{{Text: "forged"}}})
		imp.send(&protocol.Heartbeat{Type: protocol.TypeHeartbeat})
		time.Sleep(100 * time.Millisecond)
		imp.ws.CloseNow()
		eventually(t, "impostor gone", func() bool { return len(h.d.Agents()) == 0 })
		h.ev.mu.Lock()
		steps := len(h.ev.steps)
		h.ev.mu.Unlock()
		h.logs.mu.Lock()
		lines := strings.Join(h.logs.lines, ",")
		h.logs.mu.Unlock()
		if steps != 0 || lines != "" {
			t.Fatalf("%s: impostor stored %d steps, log %q", when, steps, lines)
		}
	}
}
