package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/expr"
	"kici.dev/kici/internal/store"
)

// ConditionFalsePrefix starts the errorMessage of a job skipped because its
// `if:` condition was false; the condition's text follows.
const ConditionFalsePrefix = "condition_false: if "

// ConditionErrorPrefix starts the errorMessage of a job failed because its
// condition could not be evaluated (e.g. comparing an input of the wrong
// type).
const ConditionErrorPrefix = "condition_error: "

// JobCondition returns the `if` of a lock job entry ("" when none).
func JobCondition(config json.RawMessage) string {
	var c struct {
		If string `json:"if"`
	}
	if len(config) == 0 || json.Unmarshal(config, &c) != nil {
		return ""
	}
	return c.If
}

// resultRank orders terminal statuses from best to worst; a base job with
// several matrix legs reports its worst leg as needs.<job>.result.
var resultRank = map[status.Job]int{
	status.JobSuccess: 0, status.JobSkipped: 1, status.JobCancelled: 2,
	status.JobFailed: 3, status.JobTimedOutStale: 3, status.JobDriftDropped: 3,
}

// ConditionEnv builds what job's conditions and env templates see: the
// run's event, its context (inputs, changed paths; rc may be nil), the
// job's matrix values and, per upstream job (by its YAML name: every matrix
// leg of it counts, the worst result wins and their outputs are merged in
// leg order), its result and outputs. outputs is keyed by job id
// (store.ListJobOutputs).
func ConditionEnv(run *store.Run, rc *store.RunContext, job *store.Job, jobs []*store.Job, outputs map[string]map[string]string) expr.Env {
	env := expr.Env{
		Event: expr.Event{
			Type: string(run.TriggerType), Ref: run.Ref, SHA: run.SHA, Actor: run.TriggeredBy,
			Repo: run.RepoIdentifier, TargetBranch: run.TargetBranch,
		},
		Matrix: job.MatrixValues,
		Needs:  map[string]expr.Need{},
	}
	if b, ok := strings.CutPrefix(run.Ref, "refs/heads/"); ok {
		env.Event.Branch = b
	}
	if tg, ok := strings.CutPrefix(run.Ref, "refs/tags/"); ok {
		env.Event.Tag = tg
	}
	if rc != nil {
		env.Inputs = rc.Inputs
		env.Event.ChangedPaths = rc.ChangedPaths
	}
	upstream := map[string]bool{}
	for _, n := range job.Needs {
		upstream[n.Upstream] = true
	}
	for _, j := range jobs {
		if !upstream[j.JobName] {
			continue
		}
		name := j.BaseJobName
		if name == "" {
			name = j.JobName
		}
		n, seen := env.Needs[name]
		if !seen || resultRank[j.Status] > resultRank[status.Job(n.Result)] {
			n.Result = string(j.Status)
		}
		for k, v := range outputs[j.ID] {
			if n.Outputs == nil {
				n.Outputs = map[string]string{}
			}
			n.Outputs[k] = v
		}
		env.Needs[name] = n
	}
	return env
}

// LoadConditionEnv reads the run context and the run's job outputs from st
// and builds job's ConditionEnv.
func LoadConditionEnv(ctx context.Context, st store.Store, run *store.Run, job *store.Job, jobs []*store.Job) (expr.Env, error) {
	rc, err := st.GetRunContext(ctx, run.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return expr.Env{}, err
	}
	outs, err := st.ListJobOutputs(ctx, run.ID)
	if err != nil {
		return expr.Env{}, err
	}
	return ConditionEnv(run, rc, job, jobs, outs), nil
}

// EvalJobCondition evaluates a job's `if` against env: it returns "" when
// the job may run, a skip reason (ConditionFalsePrefix…) when the condition
// is false, and an error when it cannot be evaluated.
func EvalJobCondition(cond string, env expr.Env) (skip string, err error) {
	if cond == "" {
		return "", nil
	}
	ok, err := expr.EvalString(cond, env)
	if err != nil {
		return "", err
	}
	if !ok {
		return ConditionFalsePrefix + cond, nil
	}
	return "", nil
}

// condition evaluates a ready job's `if` under the run's lock. It returns a
// skip reason, or fails the job (ConditionErrorPrefix) and reports done.
func (t *Tracker) condition(ctx context.Context, getRun func() (*store.Run, error), j *store.Job, jobs []*store.Job, at time.Time) (skip string, done bool, err error) {
	cond := JobCondition(j.Config)
	if cond == "" {
		return "", false, nil
	}
	run, err := getRun()
	if err != nil {
		return "", false, err
	}
	env, err := LoadConditionEnv(ctx, t.st, run, j, jobs)
	if err != nil {
		return "", false, fmt.Errorf("runs: condition of job %s: %w", j.ID, err)
	}
	skip, evalErr := EvalJobCondition(cond, env)
	if evalErr == nil {
		return skip, false, nil
	}
	msg := ConditionErrorPrefix + evalErr.Error()
	zero := int64(0)
	ok, err := t.st.UpdateJobStatus(ctx, j.ID, []status.Job{status.JobPending}, status.JobFailed,
		store.JobUpdate{ErrorMessage: &msg, CompletedAt: &at, DurationMs: &zero})
	if err != nil {
		return "", false, fmt.Errorf("runs: fail job %s: %w", j.ID, err)
	}
	if ok {
		t.log.Info("job condition failed", "runId", j.RunID, "jobId", j.ID, "job", j.JobName, "error", evalErr)
		t.fireJobFinished(j, status.JobFailed)
	}
	return "", true, t.refresh(ctx, j)
}

// CarriedOverPrefix starts the errorMessage of a job a partial rerun
// (`rerun --failed`, a GitHub check's "Re-run") kept from the run it
// reran; the run id follows.
const CarriedOverPrefix = "carried over from run "

// CarriedJob is the result a partial rerun keeps for one job of the run it
// reruns: its terminal Status (success, failed, skipped, …; empty means
// success) and its Outputs, so its dependents see the same values.
type CarriedJob struct {
	Status  status.Job
	Outputs map[string]string
}

// carryOver stores the carried jobs of a new rerun with the status and
// outputs they had. The run's lock must be held (it is not evaluated yet).
func (t *Tracker) carryOver(ctx context.Context, jobs []*store.Job, carried map[string]CarriedJob, from string, at time.Time) error {
	if len(carried) == 0 {
		return nil
	}
	msg := CarriedOverPrefix + from
	zero := int64(0)
	for _, j := range jobs {
		c, ok := carried[j.JobName]
		if !ok {
			continue
		}
		st := c.Status
		if st == "" {
			st = status.JobSuccess
		}
		if _, err := t.st.UpdateJobStatus(ctx, j.ID, []status.Job{status.JobPending}, st,
			store.JobUpdate{ErrorMessage: &msg, CompletedAt: &at, DurationMs: &zero}); err != nil {
			return fmt.Errorf("runs: carry over job %s: %w", j.ID, err)
		}
		if len(c.Outputs) > 0 {
			if err := t.st.PutJobOutputs(ctx, j.ID, c.Outputs); err != nil {
				return fmt.Errorf("runs: carry over job %s: %w", j.ID, err)
			}
		}
	}
	return nil
}
