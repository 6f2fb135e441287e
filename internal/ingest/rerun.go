package ingest

import (
	"context"
	"errors"
	"fmt"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// TriggerTypeRerun is the trigger type a rerun records (KiCI's run origin
// `rerun` in TRIGGER_EVENT_TYPES): the run was started by an operator, not
// by the event that started its parent, so a context whose
// triggerTypeFilters omit it does not pass for reruns.
const TriggerTypeRerun = trigger.KindRerun

// Errors of Rerun.
var (
	// ErrRunNotFound: no run has that id.
	ErrRunNotFound = errors.New("run not found")
	// ErrRunNotFinished: the run is still pending, running or cancelling.
	ErrRunNotFinished = errors.New("run has not finished")
	// ErrRerunUnavailable: the run cannot be rebuilt (its source is gone,
	// its lock is gone or invalid at its commit, its workflow is no longer
	// in that lock, or the forge could not be reached).
	ErrRerunUnavailable = errors.New("run cannot be rerun")
)

// Rerun creates a new run of the same workflow at the same commit as runID
// (KiCI pipeline/rerun.ts, whole-run only): the lock is read again at the
// run's SHA, jobs are expanded and released like a fresh run (no trigger
// matching), TriggeredBy is by, TriggerType is TriggerTypeRerun, and the new run is linked to its parent
// (and to the root of the rerun chain). The original must be terminal.
// The lock is read through the source kind's own reader (local
// repository, GitHub REST contents API, universal-git fetch; see
// rerunLock). Errors: ErrRunNotFound,
// ErrRunNotFinished, ErrRerunUnavailable (wrapped with the reason), store
// errors.
func (p *Processor) Rerun(ctx context.Context, runID, by string) (*store.Run, error) {
	return p.rerun(ctx, runID, by, nil)
}

// rerun is Rerun that, when choose is not nil, runs again only the jobs it
// picks and their dependents and carries the others over (carriedJobs).
func (p *Processor) rerun(ctx context.Context, runID, by string, choose jobChooser) (*store.Run, error) {
	orig, err := p.st.GetRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrRunNotFound
	}
	if err != nil {
		return nil, err
	}
	if !orig.Status.IsTerminal() {
		return nil, ErrRunNotFinished
	}
	var carried map[string]runs.CarriedJob
	if choose != nil {
		if carried, err = p.carriedJobs(ctx, orig.ID, choose); err != nil {
			return nil, err
		}
	}
	if orig.SourceID == "" {
		return nil, fmt.Errorf("%w: the run has no source", ErrRerunUnavailable)
	}
	src, err := p.st.GetSource(ctx, orig.SourceID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: its source was removed", ErrRerunUnavailable)
	}
	if err != nil {
		return nil, err
	}
	if !src.Enabled {
		return nil, fmt.Errorf("%w: its source %s is paused (kici-admin source enable %s)", ErrRerunUnavailable, src.Name, src.ID)
	}
	if orig.LockFileSource == "base" || orig.TrustTier == store.TrustUnknown {
		// The rerun would read the lock at the run's own commit, which for
		// a fork (or a non-writer's pull request, or a commit status on any
		// commit) is the contributor's.
		return nil, fmt.Errorf("%w: the run read its lock file from the base or default branch (a fork, a contributor without write access, or a commit status); push to the pull request or post the status again to run it again", ErrRerunUnavailable)
	}
	lf, err := p.rerunLock(ctx, orig, src)
	if err != nil {
		return nil, err
	}
	var wf *lockfile.Workflow
	for i := range lf.Workflows {
		if lf.Workflows[i].Name == orig.WorkflowName {
			wf = &lf.Workflows[i]
		}
	}
	if wf == nil {
		return nil, fmt.Errorf("%w: workflow %q is not in the lock file at %s", ErrRerunUnavailable, orig.WorkflowName, orig.SHA)
	}
	run, jobs, err := BuildRun(wf, RunContext{Source: src, RepoIdentifier: orig.RepoIdentifier, RepoURL: orig.RepoURL,
		Ref: orig.Ref, SHA: orig.SHA, TriggeredBy: by,
		TriggerType: TriggerTypeRerun, TargetBranch: orig.TargetBranch, TrustTier: orig.TrustTier})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRerunUnavailable, err)
	}
	root := orig.ID
	if l, err := p.st.GetRunLink(ctx, orig.ID); err == nil {
		root = l.OriginalRunID
	}
	if err := p.enterGroup(ctx, wf, run, "rerun"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRerunUnavailable, err)
	}
	origCtx, _ := p.st.GetRunContext(ctx, orig.ID) // nil when the original had none
	if err := p.tracker.CreateRerun(ctx, run, jobs, origCtx, carried, orig.ID); err != nil {
		return nil, err
	}
	if err := p.st.InsertRunLink(ctx, &store.RunLink{RunID: run.ID, ParentRunID: orig.ID, OriginalRunID: root, CreatedAt: run.CreatedAt}); err != nil {
		p.log.Error("record rerun link", "runId", run.ID, "parentRunId", orig.ID, "err", err)
	}
	p.log.Info("run rerun", "runId", run.ID, "parentRunId", orig.ID, "by", by)
	return run, nil
}
