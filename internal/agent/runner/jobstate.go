package runner

import (
	"strings"

	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"
	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// finishStopped sets res from a cancel or job timeout and reports whether
// there was one.
func (j *job) finishStopped(res *Result) bool {
	kind, reason := j.stopped()
	switch kind {
	case stopCancel:
		res.State = status.JobCancelled
		if reason == "" {
			reason = string(status.JobCancelled)
		}
		res.Error = reason
		return true
	case stopTimeout:
		res.State = status.JobFailed
		res.Error = reason
		return true
	}
	return false
}

// stateForced is the stepState of a job stopped by a forced cancel: no
// step runs any more, cleanup steps included.
const stateForced = "forced"

// stepState is the job state a step's runOn is matched against: forced,
// cancelled (graceful cancel), failed (job timeout or a failed step) or
// success.
func (j *job) stepState(failure string) string {
	j.stopMu.Lock()
	kind, forced := j.stopKind, j.forced
	j.stopMu.Unlock()
	switch {
	case forced:
		return stateForced
	case kind == stopCancel:
		return lockfile.StepOnCancelled
	case kind == stopTimeout, failure != "":
		return lockfile.StepOnFailed
	}
	return lockfile.StepOnSuccess
}

func (j *job) stoppedKind() int {
	kind, _ := j.stopped()
	return kind
}

// skipFrom reports steps i..end-1 as skipped (end < 0: to the last step).
func (j *job) skipFrom(i int, res *Result, end ...int) {
	last := len(j.cfg.Steps)
	if len(end) > 0 && end[0] >= 0 && end[0] < last {
		last = end[0]
	}
	for ; i < last; i++ {
		res.Steps[i] = protocol.StepResult{Name: stepName(j.cfg.Steps[i], i), Status: status.StepSkipped}
		j.r.out.Send(&protocol.StepStatus{
			Type: protocol.TypeStepStatus, RunID: j.d.RunID, JobID: j.d.JobID, StepIndex: i,
			StepName: stepName(j.cfg.Steps[i], i), State: status.StepSkipped, Timestamp: now(),
		})
	}
}

// stoppedState is the state of a step interrupted by a stop: cancelled for
// a cancel, failed for a job timeout. Both end the job's step loop.
func (j *job) stoppedState() status.Step {
	if kind, _ := j.stopped(); kind == stopTimeout {
		return status.StepFailed
	}
	return status.StepCancelled
}

func (j *job) stopError() string {
	_, reason := j.stopped()
	if reason == "" {
		return string(status.JobCancelled)
	}
	return reason
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func newID() string { return uuid.NewString() }

// checkDrift writes the library drift the orchestrator found as warnings,
// then compares the job's workflow file in the checkout with the lock the
// run was built from (lockfile.DriftCheck). It returns the job's
// error when they differ, or "" (also after logging a warning when the
// workflow downgrades drift to a warning). A job without a checkout has
// nothing to compare.
func (j *job) checkDrift(log *logstream.Stream) string {
	c := j.cfg.DriftCheck
	if c != nil {
		for _, w := range c.LibraryDrift { // found by the orchestrator; never fatal
			log.AddLine("", "Warning: "+w)
		}
	}
	if c == nil || (j.cfg.Checkout != nil && !*j.cfg.Checkout) {
		return ""
	}
	msg := c.Verify(j.srcDir)
	if msg == "" {
		return ""
	}
	if c.Warn {
		log.AddLine("", "Warning: "+msg+" (drift: warn; running the locked workflow)")
		return ""
	}
	log.AddLine("", "Error: "+msg)
	return msg
}
