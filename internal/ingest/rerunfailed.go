package ingest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// ErrUnknownJob is returned when RerunJobs is asked to rerun a job name the
// run does not have.
var ErrUnknownJob = errors.New("run has no such job")

// RerunFailed is Rerun that runs again only the jobs of runID that did not
// succeed and every job that depends on them (transitively); the jobs that
// succeeded outside that set are carried over as succeeded, with their
// outputs, so their dependents see the same values. Errors as Rerun.
func (p *Processor) RerunFailed(ctx context.Context, runID, by string) (*store.Run, error) {
	return p.rerun(ctx, runID, by, func(jobs []*store.Job) (map[string]bool, error) {
		chosen := map[string]bool{}
		for _, j := range jobs {
			if j.Status != status.JobSuccess {
				chosen[j.JobName] = true
			}
		}
		return chosen, nil
	})
}

// RerunJobs is Rerun that runs again only the jobs of runID named in
// jobNames (store.Job.JobName, a matrix leg by its leg name) and every job
// that depends on them (transitively), like GitHub's "Re-run" of one
// check; every other job is carried over with the status and outputs it
// had in runID, so its dependents see the same values. Errors as Rerun,
// plus ErrUnknownJob (wrapped with the name) for a name runID does not
// have.
func (p *Processor) RerunJobs(ctx context.Context, runID, by string, jobNames []string) (*store.Run, error) {
	return p.rerun(ctx, runID, by, func(jobs []*store.Job) (map[string]bool, error) {
		have := make(map[string]bool, len(jobs))
		for _, j := range jobs {
			have[j.JobName] = true
		}
		chosen := map[string]bool{}
		var missing []string
		for _, n := range jobNames {
			if !have[n] {
				missing = append(missing, fmt.Sprintf("%q", n))
			}
			chosen[n] = true
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return nil, fmt.Errorf("%w: %s", ErrUnknownJob, strings.Join(missing, ", "))
		}
		return chosen, nil
	})
}

// jobChooser picks, from the jobs of the run being rerun, the names of the
// jobs to run again; their dependents are added by carriedJobs.
type jobChooser func(jobs []*store.Job) (map[string]bool, error)

// carriedJobs returns the jobs of run runID a partial rerun keeps, by job
// name, with their status and outputs: the jobs outside the set choose
// picks and none of whose upstreams (transitively) is rerun.
func (p *Processor) carriedJobs(ctx context.Context, runID string, choose jobChooser) (map[string]runs.CarriedJob, error) {
	jobs, err := p.st.ListJobs(ctx, runID)
	if err != nil {
		return nil, err
	}
	outs, err := p.st.ListJobOutputs(ctx, runID)
	if err != nil {
		return nil, err
	}
	rerun, err := choose(jobs)
	if err != nil {
		return nil, err
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
	carried := map[string]runs.CarriedJob{}
	for _, j := range jobs {
		if !rerun[j.JobName] {
			carried[j.JobName] = runs.CarriedJob{Status: j.Status, Outputs: outs[j.ID]}
		}
	}
	return carried, nil
}
