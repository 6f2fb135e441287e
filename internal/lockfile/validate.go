package lockfile

import (
	"fmt"
	"strings"
)

// Limits a lock file must respect at load, whoever wrote it. They match what
// the YAML compiler enforces, so a hand-edited or hostile lock cannot make
// the orchestrator or an agent loop, wait forever or overflow.
const (
	// MaxRetryAttempts bounds retry.maxAttempts (1..10).
	MaxRetryAttempts = 10
	// MaxTimeoutMs bounds every timeout in the lock: 7 days in milliseconds.
	MaxTimeoutMs = 7 * 24 * 60 * 60 * 1000
	// MaxRetryDelayMs bounds retry delays: 1 hour in milliseconds.
	MaxRetryDelayMs = 60 * 60 * 1000
	// MaxGracePeriodSeconds bounds a job's cancel grace period (seconds).
	MaxGracePeriodSeconds = 3600
	// MaxStepsPerJob bounds the steps of one job.
	MaxStepsPerJob = 1000
)

// validateSemantics checks what JSON decoding cannot: unique job names per
// workflow, needs that name existing jobs without self-references or cycles,
// at least one step per static job, timeouts, retries and grace periods
// inside their bounds, and well-formed, distinct declared context names.
// Errors are *ParseError naming workflow, job and field.
func validateSemantics(lf *LockFile) error {
	seenWF := map[string]bool{}
	for _, wf := range lf.Workflows {
		if strings.TrimSpace(wf.Name) == "" {
			return &ParseError{Msg: "a workflow has no name"}
		}
		if seenWF[wf.Name] {
			return &ParseError{Context: fmt.Sprintf("workflow %q", wf.Name), Msg: "duplicate workflow name"}
		}
		seenWF[wf.Name] = true
		if err := checkMs(fmt.Sprintf("workflow %q timeout", wf.Name), wf.Timeout); err != nil {
			return err
		}
		if err := validateGates(&wf); err != nil {
			return err
		}
		index := map[string]int{}
		var nodes []jobNode
		for _, j := range wf.Jobs {
			if j.Type != JobStatic {
				continue
			}
			ctx := fmt.Sprintf("workflow %q job %q", wf.Name, j.Name)
			if msg := checkJobName(j.Name); msg != "" {
				return &ParseError{Context: ctx, Msg: "name " + msg}
			}
			if _, dup := index[j.Name]; dup {
				return &ParseError{Context: ctx, Msg: "duplicate job name"}
			}
			index[j.Name] = len(nodes)
			node := jobNode{name: j.Name}
			for _, n := range j.Needs {
				if n.Name != "" {
					node.needs = append(node.needs, needRef{name: n.Name})
				}
			}
			nodes = append(nodes, node)
			if err := checkJobLimits(ctx, &j); err != nil {
				return err
			}
		}
		for _, n := range nodes {
			for _, r := range n.needs {
				ctx := fmt.Sprintf("workflow %q job %q needs", wf.Name, n.name)
				if r.name == n.name {
					return &ParseError{Context: ctx, Msg: "a job cannot need itself"}
				}
				if _, ok := index[r.name]; !ok {
					return &ParseError{Context: ctx, Msg: fmt.Sprintf("unknown job %q", r.name)}
				}
			}
		}
		if cycle := findCycle(nodes, index); cycle != nil {
			return &ParseError{Context: fmt.Sprintf("workflow %q", wf.Name), Msg: "needs cycle: " + strings.Join(cycle, " → ")}
		}
	}
	return nil
}

func checkJobLimits(ctx string, j *Job) error {
	if len(j.Steps) == 0 {
		return &ParseError{Context: ctx, Msg: "job has no steps"}
	}
	if len(j.Steps) > MaxStepsPerJob {
		return &ParseError{Context: ctx, Msg: fmt.Sprintf("%d steps exceed the limit of %d", len(j.Steps), MaxStepsPerJob)}
	}
	if err := checkMs(ctx+" timeout", j.Timeout); err != nil {
		return err
	}
	if j.GracePeriod < 0 || j.GracePeriod > MaxGracePeriodSeconds {
		return &ParseError{Context: ctx + " gracePeriod", Msg: fmt.Sprintf("%d s is outside 0..%d s", j.GracePeriod, MaxGracePeriodSeconds)}
	}
	if i, msg := checkContextNames(j.Contexts); i >= 0 {
		return &ParseError{Context: fmt.Sprintf("%s contexts[%d]", ctx, i), Msg: msg}
	}
	for i, s := range j.Steps {
		sctx := fmt.Sprintf("%s step %d (%q)", ctx, i, s.Name)
		if err := checkMs(sctx+" timeout", s.Timeout); err != nil {
			return err
		}
		if r := s.Retry; r != nil {
			if r.MaxAttempts < 1 || r.MaxAttempts > MaxRetryAttempts {
				return &ParseError{Context: sctx + " retry.maxAttempts", Msg: fmt.Sprintf("%d is outside 1..%d", r.MaxAttempts, MaxRetryAttempts)}
			}
			if r.DelayMs < 0 || r.DelayMs > MaxRetryDelayMs || r.MaxDelayMs < 0 || r.MaxDelayMs > MaxRetryDelayMs {
				return &ParseError{Context: sctx + " retry", Msg: fmt.Sprintf("delays must be within 0..%d ms", MaxRetryDelayMs)}
			}
			if r.Backoff != "" && r.Backoff != "fixed" && r.Backoff != "exponential" {
				return &ParseError{Context: sctx + " retry.backoff", Msg: fmt.Sprintf("%q is not fixed or exponential", r.Backoff)}
			}
		}
	}
	return nil
}

func checkMs(ctx string, ms int64) error {
	if ms < 0 || ms > MaxTimeoutMs {
		return &ParseError{Context: ctx, Msg: fmt.Sprintf("%d ms is outside 0..%d ms", ms, int64(MaxTimeoutMs))}
	}
	return nil
}
