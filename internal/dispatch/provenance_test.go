package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/testutil/wait"
)

type recAttester struct {
	mu    sync.Mutex
	calls []string
}

func (r *recAttester) Attest(_ context.Context, runID, jobID string, subjects []protocol.AttestSubject) ([]protocol.AttestationRef, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, runID+"/"+jobID)
	var out []protocol.AttestationRef
	for _, s := range subjects {
		out = append(out, protocol.AttestationRef{ID: "att-" + s.Name, SubjectName: s.Name, SubjectDigest: "sha256:" + s.Digest["sha256"]})
	}
	return out, nil
}

func (r *recAttester) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func attestResult(t *testing.T, c *client) *protocol.ProvenanceAttestResult {
	t.Helper()
	for {
		m := c.read()
		if r, ok := m.(*protocol.ProvenanceAttestResult); ok {
			return r
		}
	}
}

func TestAttestOnlyByTheAgentThatRunsTheJob(t *testing.T) {
	rec := &recAttester{}
	h := newHarnessWith(t, Config{}, nil, Deps{Attester: rec})
	owner := h.agent("agent-a", h.staticToken(), "linux")
	other := h.agent("agent-b", h.staticToken(), "windows")
	j := h.job("linux")
	h.enqueue(j)
	jd := owner.dispatch()
	owner.status(jd, status.JobRunning)
	subj := []protocol.AttestSubject{{Name: "app", Digest: map[string]string{"sha256": "ab"}}}
	req := func(runID, jobID, id string) *protocol.ProvenanceAttest {
		return &protocol.ProvenanceAttest{Type: protocol.TypeProvenanceAttest, RequestID: id, RunID: runID, JobID: jobID, Subjects: subj}
	}

	// Another agent asking for the job: refused, nothing signed.
	other.send(req(jd.RunID, jd.JobID, "q1"))
	if r := attestResult(t, other); r.OK || r.RequestID != "q1" || r.Error == "" {
		t.Fatalf("foreign agent: %+v", r)
	}
	// The owner with a runId that is not the job's: refused.
	owner.send(req("another-run", jd.JobID, "q2"))
	if r := attestResult(t, owner); r.OK || r.Error != "runId does not match the job" {
		t.Fatalf("wrong run: %+v", r)
	}
	if rec.count() != 0 {
		t.Fatalf("attester called %d times for refused requests", rec.count())
	}
	// The owner while the job runs: signed with the dispatcher's run id.
	owner.send(req(jd.RunID, jd.JobID, "q3"))
	r := attestResult(t, owner)
	if !r.OK || r.RequestID != "q3" || len(r.Attestations) != 1 || r.Attestations[0].SubjectDigest != "sha256:ab" {
		t.Fatalf("owner: %+v", r)
	}
	if rec.calls[0] != jd.RunID+"/"+jd.JobID {
		t.Fatalf("attester got %v", rec.calls)
	}
	// After the job finished: refused even for the owner.
	owner.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "job finished", func() bool { return len(h.ev.finishedOf(jd.JobID)) == 1 })
	owner.send(req(jd.RunID, jd.JobID, "q4"))
	if r := attestResult(t, owner); r.OK || r.Error != "job is not running on this agent" {
		t.Fatalf("finished job: %+v", r)
	}
	if rec.count() != 1 {
		t.Fatalf("attester called %d times, want 1", rec.count())
	}
}

func TestAttestWithoutAttesterIsRefused(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	a := h.agent("agent-a", h.staticToken(), "linux")
	j := h.job("linux")
	h.enqueue(j)
	jd := a.dispatch()
	a.status(jd, status.JobRunning)
	a.send(&protocol.ProvenanceAttest{Type: protocol.TypeProvenanceAttest, RequestID: "q", RunID: jd.RunID, JobID: jd.JobID,
		Subjects: []protocol.AttestSubject{{Name: "x", Digest: map[string]string{"sha256": "00"}}}})
	if r := attestResult(t, a); r.OK || r.Error == "" {
		t.Fatalf("no attester: %+v", r)
	}
}
