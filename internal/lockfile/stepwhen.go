package lockfile

import (
	"slices"
	"strings"

	"kici.dev/kici/internal/runs/status"

	"github.com/goccy/go-yaml/ast"
)

// Step states a step's `when` (lock `runOn`) selects: the state the job is
// in when the step's turn comes.
const (
	// StepOnSuccess: no earlier step failed and the job is not stopped.
	StepOnSuccess = string(status.JobSuccess)
	// StepOnFailed: an earlier step failed, or the job hit its timeout.
	StepOnFailed = string(status.JobFailed)
	// StepOnCancelled: the job was cancelled gracefully.
	StepOnCancelled = string(status.JobCancelled)
)

// StepStates are the valid elements of Step.RunOn.
var StepStates = []string{StepOnSuccess, StepOnFailed, StepOnCancelled}

// stepWhenKeywords maps a YAML step `when` keyword to its runOn set. The
// default (on-success) is stored as an empty list so locks without cleanup
// steps are unchanged.
var stepWhenKeywords = map[string][]string{
	"on-success": nil,
	"on-failure": {StepOnFailed},
	"on-cancel":  {StepOnCancelled},
	"always":     {StepOnSuccess, StepOnFailed, StepOnCancelled},
}

// stepWhen compiles a step's `when`: a keyword (on-success, on-failure,
// on-cancel, always) or a non-empty list of step states.
func (f *yfile) stepWhen(n ast.Node, what string) []string {
	if s, ok := f.scalar(n); ok {
		set, known := stepWhenKeywords[s]
		if !known {
			f.errorf(n, "%s must be on-success, on-failure, on-cancel, always or a list of %s, got %q", what, strings.Join(StepStates, ", "), s)
			return nil
		}
		return slices.Clone(set)
	}
	list, ok := f.strList(n, what)
	if !ok {
		return nil
	}
	if len(list) == 0 {
		f.errorf(n, "%s: the state list must not be empty", what)
		return nil
	}
	var out []string
	for _, s := range list {
		if !slices.Contains(StepStates, s) {
			f.errorf(n, "%s: %q is not a step state (%s)", what, s, strings.Join(StepStates, ", "))
			continue
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 1 && out[0] == StepOnSuccess {
		return nil
	}
	// Canonical order keeps the lock's content hash stable.
	slices.SortFunc(out, func(a, b string) int { return slices.Index(StepStates, a) - slices.Index(StepStates, b) })
	return out
}

// StepRuns reports whether a step with runOn runs when the job is in state
// (one of StepStates).
func StepRuns(runOn []string, state string) bool {
	if len(runOn) == 0 {
		return state == StepOnSuccess
	}
	return slices.Contains(runOn, state)
}
