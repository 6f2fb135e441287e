package pipeline

import (
	"context"

	"kici.dev/kici/internal/execution"
	"kici.dev/kici/internal/store"
)

// RerunFailed is Rerun that runs again only the jobs of runID that did not
// succeed and every job that depends on them (transitively); the jobs that
// succeeded outside that set are carried over as succeeded, with their
// outputs, so their dependents see the same values. Errors as Rerun.
func (p *Processor) RerunFailed(ctx context.Context, runID, by string) (*store.Run, error) {
	return p.rerun(ctx, runID, by, true)
}

// carriedJobs returns the jobs of run runID a rerun --failed keeps, by job
// name, with their outputs: the succeeded jobs none of whose upstreams
// (transitively) is rerun.
func (p *Processor) carriedJobs(ctx context.Context, runID string) (map[string]map[string]string, error) {
	jobs, err := p.st.ListJobs(ctx, runID)
	if err != nil {
		return nil, err
	}
	outs, err := p.st.ListJobOutputs(ctx, runID)
	if err != nil {
		return nil, err
	}
	rerun := map[string]bool{}
	for _, j := range jobs {
		if j.Status != execution.StatusSuccess {
			rerun[j.JobName] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, j := range jobs {
			if rerun[j.JobName] {
				continue
			}
			for _, n := range j.Needs {
				if rerun[n.Upstream] {
					rerun[j.JobName], changed = true, true
					break
				}
			}
		}
	}
	carried := map[string]map[string]string{}
	for _, j := range jobs {
		if !rerun[j.JobName] {
			carried[j.JobName] = outs[j.ID]
		}
	}
	return carried, nil
}
