package ingest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// Errors of StartManualRun.
var (
	// ErrSourceNotFound: no source has that id.
	ErrSourceNotFound = errors.New("source not found")
	// ErrManualRunUnavailable: the run cannot be started (disabled source,
	// unknown ref, lock missing or invalid, workflow not in the lock or
	// without a dispatch trigger).
	ErrManualRunUnavailable = errors.New("manual run unavailable")
	// ErrInvalidInputs: the inputs do not satisfy the dispatch trigger's
	// declarations; the message names each offending input.
	ErrInvalidInputs = errors.New("invalid inputs")
	// ErrRefNotFound: the ref names no branch, tag or commit of the
	// repository; the message names the ref and the repository.
	ErrRefNotFound = errors.New("ref not found")
)

// ManualRun is a request to run one workflow by hand.
type ManualRun struct {
	SourceID string
	Workflow string
	// Ref is a branch name, a tag name, a full ref (refs/heads/…,
	// refs/tags/…) or a commit SHA; "" means the repository's HEAD (local
	// sources) or default branch (GitHub sources, read through the API).
	// Generic sources need a full commit SHA (their refs are not resolved).
	Ref string
	// Repo is the "owner/repo" of a forge source (ignored for local ones).
	Repo string
	// Inputs are the raw values (strings from a command line, or JSON
	// values); they are validated and typed against the workflow's
	// dispatch trigger.
	Inputs map[string]any
	// By is who asked (the admin token's label).
	By string
}

// StartManualRun starts a run of req.Workflow at req.Ref, as a `dispatch`
// event would (KiCI's manual trigger, trigger type "manual"): the lock is
// read at the resolved commit, the workflow must declare a `dispatch`
// trigger, whose typed inputs the request must satisfy (unknown, missing
// required and mistyped inputs are ErrInvalidInputs naming them; defaults
// fill the rest). The inputs are stored with the run (KICI_INPUT_<NAME>,
// `inputs.<name>` in conditions). Errors: ErrSourceNotFound,
// ErrRefNotFound, ErrManualRunUnavailable, ErrInvalidInputs, store errors.
func (p *Processor) StartManualRun(ctx context.Context, req ManualRun) (*store.Run, error) {
	src, err := p.st.GetSource(ctx, req.SourceID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrSourceNotFound
	}
	if err != nil {
		return nil, err
	}
	if !src.Enabled {
		return nil, fmt.Errorf("%w: source %s is disabled", ErrManualRunUnavailable, src.ID)
	}
	var ref, sha, repoIdent, repoURL string
	var lf *lockfile.LockFile
	if src.Provider == provider.GitHub {
		var t *gitHubTarget
		if t, err = p.manualGitHubTarget(ctx, src, req); err != nil {
			return nil, err
		}
		ref, sha, repoIdent, repoURL, lf = t.ref, t.sha, t.repo, t.repoURL, t.lock
	} else {
		if ref, sha, repoIdent, repoURL, err = p.resolveManualRef(ctx, src, req); err != nil {
			return nil, err
		}
		probe := &store.Run{RepoIdentifier: repoIdent, SHA: sha}
		if lf, err = p.rerunLock(ctx, probe, src); err != nil {
			return nil, manualLockErr(err)
		}
	}
	var wf *lockfile.Workflow
	var names []string
	for i := range lf.Workflows {
		names = append(names, lf.Workflows[i].Name)
		if lf.Workflows[i].Name == req.Workflow {
			wf = &lf.Workflows[i]
		}
	}
	if wf == nil {
		return nil, fmt.Errorf("%w: workflow %q is not in the lock file at %s (workflows: %s)", ErrManualRunUnavailable, req.Workflow, sha, strings.Join(names, ", "))
	}
	var trig *lockfile.Trigger
	for i := range wf.Triggers {
		if wf.Triggers[i].Type == "dispatch" {
			trig = &wf.Triggers[i]
			break
		}
	}
	if trig == nil {
		return nil, fmt.Errorf("%w: workflow %q has no dispatch trigger (add `on: {dispatch: {}}` to run it by hand)", ErrManualRunUnavailable, wf.Name)
	}
	inputs, err := lockfile.ResolveInputs(trig.Inputs, req.Inputs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidInputs, err)
	}
	inputs = lockfile.WithInputDefaults(wf, inputs)
	rc := RunContext{Source: src, RepoIdentifier: repoIdent, RepoURL: repoURL, Ref: ref, SHA: sha,
		TriggeredBy: req.By, TriggerType: trigger.KindManual}
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		rc.TargetBranch = b
	}
	if src.Provider == provider.Local || src.Provider == provider.GitHub {
		rc.TrustTier = store.TrustTrusted // an operator asked for it
	}
	run, jobs, err := BuildRun(wf, rc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManualRunUnavailable, err)
	}
	if err := p.enterGroup(ctx, wf, run, "manual"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManualRunUnavailable, err)
	}
	if err := p.tracker.CreateRunWithContext(ctx, run, jobs, &store.RunContext{Inputs: inputs}); err != nil {
		return nil, err
	}
	p.log.Info("manual run", "runId", run.ID, "workflow", wf.Name, "sha", sha, "by", req.By)
	return run, nil
}

// resolveManualRef turns the request's ref into (full ref, commit SHA,
// repository identifier, clone URL) for src.
func (p *Processor) resolveManualRef(ctx context.Context, src *store.Source, req ManualRun) (ref, sha, repoIdent, repoURL string, err error) {
	ref = req.Ref
	if src.Provider != provider.Local {
		if !lockfetch.IsSHA(ref) {
			return "", "", "", "", fmt.Errorf("%w: a %s source needs --ref to be a full commit SHA", ErrManualRunUnavailable, src.Provider)
		}
		if req.Repo == "" {
			return "", "", "", "", fmt.Errorf("%w: a %s source needs the repository (owner/repo)", ErrManualRunUnavailable, src.Provider)
		}
		return ref, ref, req.Repo, "", nil
	}
	repo, err := p.localRepo(src.LocalPath)
	if err != nil {
		return "", "", "", "", fmt.Errorf("%w: %v", ErrManualRunUnavailable, err)
	}
	if ref == "" {
		ref = "HEAD"
	}
	candidates := []string{ref}
	if !strings.HasPrefix(ref, "refs/") && ref != "HEAD" && !lockfetch.IsSHA(ref) {
		candidates = []string{"refs/heads/" + ref, "refs/tags/" + ref}
	}
	for _, c := range candidates {
		if s, err := repo.ResolveCommit(ctx, c); err == nil {
			sha, ref = s, c
			break
		}
	}
	if sha == "" {
		return "", "", "", "", fmt.Errorf("%w: %q names no branch, tag or commit of %s", ErrRefNotFound, req.Ref, src.LocalPath)
	}
	if ref == "HEAD" {
		if out, err := exec.CommandContext(ctx, "git", "-C", repo.Path(), "symbolic-ref", "-q", "HEAD").Output(); err == nil && len(out) > 0 {
			ref = strings.TrimSpace(string(out))
		} else {
			ref = sha
		}
	}
	return ref, sha, src.OrgID + "/" + src.Name, "file://" + repo.Path(), nil
}

// manualLockErr rewraps a lock-read error of rerunLock as
// ErrManualRunUnavailable.
func manualLockErr(err error) error {
	if !errors.Is(err, ErrRerunUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %s", ErrManualRunUnavailable, strings.TrimPrefix(err.Error(), ErrRerunUnavailable.Error()+": "))
}
