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
