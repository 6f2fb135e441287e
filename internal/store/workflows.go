package store

import (
	"context"
	"encoding/json"
)

// RunContext is what a run's `if:` conditions and env templates see beyond
// the run row: the inputs of a manual or scheduled run (name → typed value)
// and the files the event changed.
type RunContext struct {
	Inputs       map[string]any `json:"inputs,omitempty"`
	ChangedPaths []string       `json:"changedPaths,omitempty"`
}

// WorkflowDataStore keeps job outputs and run contexts.
type WorkflowDataStore interface {
	// PutJobOutputs stores the outputs a job exported (name → value),
	// replacing earlier ones. ErrNotFound when the job does not exist.
	PutJobOutputs(ctx context.Context, jobID string, outputs map[string]string) error
	// ListJobOutputs returns the outputs of a run's jobs, keyed by job id;
	// jobs without outputs are absent.
	ListJobOutputs(ctx context.Context, runID string) (map[string]map[string]string, error)
	// PutRunContext stores a run's context, replacing an earlier one.
	// ErrNotFound when the run does not exist.
	PutRunContext(ctx context.Context, runID string, rc *RunContext) error
	// GetRunContext returns a run's context, or ErrNotFound.
	GetRunContext(ctx context.Context, runID string) (*RunContext, error)
	// DispatchRows reads what a job's job.dispatch is built from, at once:
	// the run, its jobs, its context and its outputs. On PostgreSQL it is
	// one round trip to the server instead of one per read. ErrNotFound
	// when the run does not exist or job jobID is not one of its jobs.
	DispatchRows(ctx context.Context, runID, jobID string) (*DispatchRows, error)
}

// DispatchRows is what the dispatcher builds a job.dispatch from
// (WorkflowDataStore.DispatchRows).
type DispatchRows struct {
	// Run is the job's run.
	Run *Run
	// Job is the job itself, one of Jobs.
	Job *Job
	// Jobs are the run's jobs in creation order (ListJobs).
	Jobs []*Job
	// Context is the run's context, nil when it has none (GetRunContext).
	Context *RunContext
	// Outputs are the run's job outputs by job id (ListJobOutputs).
	Outputs map[string]map[string]string
}

// EncodeRunContext returns the stored columns of a run context (inputs and
// changed paths as JSON), for the store implementations.
func EncodeRunContext(rc *RunContext) (inputs, changedPaths string, err error) {
	in := rc.Inputs
	if in == nil {
		in = map[string]any{}
	}
	paths := rc.ChangedPaths
	if paths == nil {
		paths = []string{}
	}
	a, err := json.Marshal(in)
	if err != nil {
		return "", "", err
	}
	b, err := json.Marshal(paths)
	if err != nil {
		return "", "", err
	}
	return string(a), string(b), nil
}

// DecodeRunContext is the inverse of EncodeRunContext.
func DecodeRunContext(inputs, changedPaths string) (*RunContext, error) {
	rc := &RunContext{}
	if err := json.Unmarshal([]byte(inputs), &rc.Inputs); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(changedPaths), &rc.ChangedPaths); err != nil {
		return nil, err
	}
	if len(rc.Inputs) == 0 {
		rc.Inputs = nil
	}
	if len(rc.ChangedPaths) == 0 {
		rc.ChangedPaths = nil
	}
	return rc, nil
}
