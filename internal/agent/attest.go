package agent

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
)

// attestWaiters holds the provenance.attest requests awaiting their
// provenance.attest.result, by request id. The zero value is ready to use.
type attestWaiters struct {
	mu      sync.Mutex
	pending map[string]chan *protocol.ProvenanceAttestResult
}

// attest implements runner.AttestFunc: it sends provenance.attest and waits
// for the matching result (or ctx).
func (a *Agent) attest(ctx context.Context, runID, jobID string, subjects []protocol.AttestSubject) ([]protocol.AttestationRef, error) {
	id := uuid.NewString()
	ch := make(chan *protocol.ProvenanceAttestResult, 1)
	w := &a.attests
	w.mu.Lock()
	if w.pending == nil {
		w.pending = map[string]chan *protocol.ProvenanceAttestResult{}
	}
	w.pending[id] = ch
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
	}()
	a.client.Send(&protocol.ProvenanceAttest{Type: protocol.TypeProvenanceAttest, RequestID: id, RunID: runID, JobID: jobID, Subjects: subjects})
	select {
	case r := <-ch:
		if !r.OK {
			if r.Error == "" {
				r.Error = "refused by the orchestrator"
			}
			return nil, errors.New(r.Error)
		}
		return r.Attestations, nil
	case <-ctx.Done():
		return nil, errors.New("no answer from the orchestrator: " + ctx.Err().Error())
	}
}

// onAttestResult hands a result to its waiting request; unknown ids (late
// answers) are dropped.
func (a *Agent) onAttestResult(r *protocol.ProvenanceAttestResult) {
	w := &a.attests
	w.mu.Lock()
	ch := w.pending[r.RequestID]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r:
		default:
		}
	}
}
