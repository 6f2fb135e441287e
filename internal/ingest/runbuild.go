package ingest

// Building a run and its jobs from a lock workflow and the facts of the
// delivery that triggered it (RunContext, BuildRun).

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// RunContext carries the delivery facts a run is built from.
type RunContext struct {
	DeliveryID     string
	Source         *store.Source
	RepoIdentifier string // "<org>/<name>"
	RepoURL        string // "file://<path>" for local sources
	Ref            string // full ref, e.g. refs/heads/main
	SHA            string
	TriggeredBy    string
	// TriggerType, TargetBranch and TrustTier are the run's gate facts
	// (store.Run); withEvent fills them from the matched event.
	TriggerType  trigger.Kind
	TargetBranch string
	TrustTier    string
	// LockFileSource is "base" when the lock came from the base branch.
	LockFileSource string
	// WorkflowOrigin is set for an organization-wide workflow defined in
	// another source (store.Run.WorkflowOrigin); its jobs then carry no
	// drift check, since the checkout is the triggering repository's.
	WorkflowOrigin string
	// LibraryDrift are the workflow's library drift warnings
	// (lockfile.LibraryDrift), given to its jobs' drift check.
	LibraryDrift []string
}

// hasForkModel reports whether events of provider can come from forks:
// every forge (GitHub and the universal-git presets), not the local
// provider or plain generic webhooks.
func hasForkModel(p provider.Name) bool {
	switch p {
	case "", provider.Local, provider.Generic, provider.Kici:
		return false
	}
	return true
}

// withEvent returns rc with the gate facts of ev filled in where rc has
// none: the trigger type; the target branch (a pull request's base branch,
// else the pushed branch, else the branch of rc.Ref; "" for tags and
// internal events); and the trust tier of forge pull requests (unknown
// for a fork, trusted otherwise) and pushes (trusted). Providers without a
// fork model leave the tier empty (KiCI skips the fork switch there too).
func (rc RunContext) withEvent(ev *trigger.Event) RunContext {
	if ev == nil {
		return rc
	}
	if rc.TriggerType == "" {
		rc.TriggerType = ev.Type
	}
	if rc.TargetBranch == "" {
		switch {
		case ev.BaseBranch != "":
			rc.TargetBranch = ev.BaseBranch
		case ev.Type == trigger.KindPush:
			rc.TargetBranch = ev.TargetBranch
		case strings.HasPrefix(rc.Ref, "refs/heads/") && ev.Type != trigger.KindTag:
			rc.TargetBranch = strings.TrimPrefix(rc.Ref, "refs/heads/")
		}
	}
	if rc.TrustTier == "" && hasForkModel(ev.Provider) {
		switch ev.Type {
		case trigger.KindPullRequest, trigger.KindReview, trigger.KindReviewComment:
			rc.TrustTier = store.TrustTrusted
			if ev.IsForkPR {
				rc.TrustTier = store.TrustUnknown
			}
		case trigger.KindPush, trigger.KindTag:
			rc.TrustTier = store.TrustTrusted
		}
	}
	return rc
}

// BuildRun builds the run (status pending, new uuid) and its jobs for one
// workflow: one job per matrix leg (lockfile.ExpandMatrix), ID a new
// time-ordered uuid (NewJobID), Config the lock job as JSON, MatrixValues
// the leg's values, RunsOnLabels the exact runsOn values, TimeoutMs the job
// timeout, and Needs expanded per leg (a need on a matrix job's base name
// yields one edge per leg, runOn defaulting to ["success"]). Errors: a
// dynamic job or group need, a regex runsOn matcher (not routable yet), a
// bad matrix, a need on an unknown job, or a workflow with no jobs (a run
// without jobs is never created).
func BuildRun(wf *lockfile.Workflow, rc RunContext) (*store.Run, []*store.Job, error) {
	now := time.Now().UTC()
	run := &store.Run{
		ID: NewRunID(), WorkflowName: wf.Name, Status: status.RunPending, Provider: provider.Local,
		RepoIdentifier: rc.RepoIdentifier, RepoURL: rc.RepoURL, Ref: rc.Ref, SHA: rc.SHA,
		DeliveryID: rc.DeliveryID, TriggeredBy: rc.TriggeredBy, TimeoutMs: wf.Timeout, CreatedAt: now,
		TriggerType: rc.TriggerType, TargetBranch: rc.TargetBranch, TrustTier: rc.TrustTier, LockFileSource: rc.LockFileSource,
		WorkflowOrigin: rc.WorkflowOrigin,
	}
	if rc.Source != nil {
		run.SourceID, run.OrgID, run.Provider = rc.Source.ID, rc.Source.OrgID, rc.Source.Provider
	}
	if len(wf.Jobs) == 0 {
		return nil, nil, errors.New("workflow has no jobs")
	}
	legs := make([][]lockfile.Leg, len(wf.Jobs))
	legNames := map[string][]string{}
	for i := range wf.Jobs {
		j := &wf.Jobs[i]
		if j.Type != "" && j.Type != lockfile.JobStatic {
			return nil, nil, fmt.Errorf("job %q: job type %q is not supported", j.Name, j.Type)
		}
		if _, dup := legNames[j.Name]; dup {
			return nil, nil, fmt.Errorf("duplicate job name %q", j.Name)
		}
		l, err := lockfile.ExpandMatrix(j)
		if err != nil {
			return nil, nil, err
		}
		if len(l) == 0 {
			return nil, nil, fmt.Errorf("job %q: matrix expands to no legs", j.Name)
		}
		legs[i] = l
		for _, leg := range l {
			legNames[j.Name] = append(legNames[j.Name], leg.Name)
		}
	}
	var jobs []*store.Job
	for i := range wf.Jobs {
		j := &wf.Jobs[i]
		labels := []string{}
		for _, m := range j.RunsOn {
			if m.Kind != lockfile.MatcherExact {
				return nil, nil, fmt.Errorf("job %q: runsOn matcher kind %q is not supported (only exact labels)", j.Name, m.Kind)
			}
			labels = append(labels, m.Value)
		}
		var needs []store.Need
		for _, n := range j.Needs {
			if n.Group != "" {
				return nil, nil, fmt.Errorf("job %q: needs on dynamic group %q are not supported", j.Name, n.Group)
			}
			ups, ok := legNames[n.Name]
			if !ok {
				return nil, nil, fmt.Errorf("job %q needs unknown job %q", j.Name, n.Name)
			}
			runOn := n.RunOn
			if len(runOn) == 0 {
				runOn = []status.Job{status.JobSuccess}
			}
			for _, up := range ups {
				needs = append(needs, store.Need{Upstream: up, RunOn: slices.Clone(runOn)})
			}
		}
		withDrift := *j
		// A fork pull request runs the base branch's lock on the fork's code
		// on purpose (the trust policy): its workflow files may differ from
		// that lock, and that is not drift.
		if rc.LockFileSource != "base" && rc.WorkflowOrigin == "" {
			withDrift.DriftCheck = lockfile.NewDriftCheck(wf)
			if withDrift.DriftCheck != nil {
				withDrift.DriftCheck.LibraryDrift = rc.LibraryDrift
			}
		}
		cfg, err := json.Marshal(withDrift)
		if err != nil {
			return nil, nil, fmt.Errorf("job %q: encode config: %w", j.Name, err)
		}
		for _, leg := range legs[i] {
			jobs = append(jobs, &store.Job{
				ID: NewJobID(), RunID: run.ID, JobName: leg.Name, BaseJobName: j.Name,
				MatrixValues: leg.Values, Status: status.JobPending, Config: cfg,
				RunsOnLabels: slices.Clone(labels), Needs: slices.Clone(needs), TimeoutMs: j.Timeout, CreatedAt: now,
			})
		}
	}
	return run, jobs, nil
}
