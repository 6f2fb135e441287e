package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"kici.dev/kici/internal/contexts"
	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	ghprov "kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// Lock statuses recorded in Trace.LockStatus (KiCI event-log words).
const (
	LockMissing  = "lockfile_missing"
	LockCorrupt  = "lockfile_corrupt"
	LockTooLarge = "lockfile_too_large"
)

// Forges is what the pipeline needs to read locks from forges: the lock
// cache (keyed by provider, repository and ref) and one REST client per
// GitHub source. Create it with NewForges; safe for concurrent use.
type Forges struct {
	// Locks caches lock outcomes.
	Locks *lockfetch.Cache
	// HTTP is the client for forge APIs (nil = 30 s timeout client).
	HTTP *http.Client

	mu      sync.Mutex
	clients map[string]cachedClient
}

type cachedClient struct {
	c       *ghapi.Client
	version time.Time
}

// NewForges returns forges with a lock cache capped at lockMaxBytes per
// lock (lockfetch.DefaultMaxBytes when ≤ 0).
func NewForges(lockMaxBytes int64) *Forges {
	return &Forges{Locks: lockfetch.New(0, lockMaxBytes), clients: map[string]cachedClient{}}
}

// GitHubClient returns the REST client of a github source from its
// settings (App or token), reusing it until the settings change.
func (f *Forges) GitHubClient(set *store.SourceSettings) (*ghapi.Client, error) {
	if set == nil || set.GitHub == nil {
		return nil, errors.New("github source has no provider configuration")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if cc, ok := f.clients[set.SourceID]; ok && cc.version.Equal(set.UpdatedAt) {
		return cc.c, nil
	}
	g := set.GitHub
	var c *ghapi.Client
	if g.AppID > 0 {
		var err error
		if c, err = ghapi.NewAppClient(g.APIBaseURL, g.AppID, g.PrivateKeyPEM, f.HTTP); err != nil {
			return nil, err
		}
	} else {
		c = ghapi.NewTokenClient(g.APIBaseURL, g.Token, f.HTTP)
	}
	f.clients[set.SourceID] = cachedClient{c: c, version: set.UpdatedAt}
	return c, nil
}

func (p *Processor) forges() *Forges {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Forges == nil {
		p.Forges = NewForges(0)
	}
	return p.Forges
}

// handleExtension handles the deliveries that are not local-source pushes:
// internal events (no source: kici_event, workflow_complete, job_complete,
// schedule) and GitHub deliveries. ok=false leaves the delivery to the
// local-source path with the source it read (nil for an internal event),
// so that path does not read it again.
func (p *Processor) handleExtension(ctx context.Context, d *store.Delivery, h *handed, b *stagedRuns) (tr *Trace, src *store.Source, err error, ok bool) {
	if d.SourceID == "" {
		tr, err = p.handleInternal(ctx, d, b)
		return tr, nil, err, true
	}
	src, set, handedSource := h.source()
	if !handedSource {
		src, err = p.st.GetSource(ctx, d.SourceID)
		if err != nil {
			return &Trace{Event: d.Event}, nil, fmt.Errorf("source %s: %w", d.SourceID, err), true
		}
	}
	if src.Provider == provider.GitHub {
		tr, err = p.handleGitHub(ctx, d, src, b)
		return tr, src, err, true
	}
	if src.Provider == provider.Generic {
		if !handedSource {
			set, err = p.st.GetSourceSettings(ctx, src.ID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return &Trace{Event: d.Event}, src, fmt.Errorf("settings of source %s: %w", src.ID, err), true
			}
		}
		if set != nil && set.Git != nil {
			tr, err = p.handleUniversal(ctx, d, src, set.Git, b)
			return tr, src, err, true
		}
		tr, err = p.handleGeneric(ctx, d, src, b)
		return tr, src, err, true
	}
	return nil, src, nil, false
}

// outcomeOf maps a processed delivery to its event-log outcome.
func outcomeOf(tr *Trace, status store.DeliveryStatus) store.EventOutcome {
	o := store.EventOutcome{Status: store.EventLogProcessed, Ref: tr.Ref}
	switch {
	case status == store.DeliveryFailed:
		o.Status = store.EventLogFailed
	case tr.LockStatus == LockMissing:
		o.Status = store.EventLogLockfileMissing
	}
	for _, w := range tr.Workflows {
		if w.Matched {
			o.MatchedCount++
		}
	}
	for _, r := range tr.Runs {
		o.RunIDs = append(o.RunIDs, r.RunID)
	}
	return o
}

// jsonObj walks a decoded JSON object by keys; nil when any step is absent
// or of another type.
func jsonObj(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = o[k]
	}
	return cur
}

func jsonStr(m map[string]any, keys ...string) string {
	s, _ := jsonObj(m, keys...).(string)
	return s
}

func jsonInt(m map[string]any, keys ...string) int64 {
	switch v := jsonObj(m, keys...).(type) {
	case float64:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	}
	return 0
}

// handleGitHub normalizes a GitHub delivery, reads the lock at the event's
// lock ref through the source's REST client (the base branch's lock for a
// pull request whose author cannot write to the repository), fetches
// changed files when a trigger filters on paths, matches every workflow,
// creates the runs, and refreshes the registrations on a push to the
// default branch.
func (p *Processor) handleGitHub(ctx context.Context, d *store.Delivery, src *store.Source, b *stagedRuns) (*Trace, error) {
	if tr, ok := p.handleRerequestDelivery(ctx, d, src); ok {
		return tr, nil
	}
	tr := &Trace{Event: d.Event}
	ev, lref, err := ghprov.Normalize(d.Event, d.Payload)
	if errors.Is(err, provider.ErrUnsupportedEvent) {
		tr.Summary = "ignored: " + err.Error()
		return tr, nil
	}
	if err != nil {
		return tr, err
	}
	var payload map[string]any
	if err := json.Unmarshal(d.Payload, &payload); err != nil {
		return tr, fmt.Errorf("%w: %v", provider.ErrInvalidPayload, err)
	}
	repo := ev.SourceRepo
	if repo == "" {
		tr.Summary = "the event names no repository; nothing to run"
		return tr, nil
	}
	withForgeCommitMessage(ev, payload)
	if p.handleKiciComment(ctx, tr, src, ev, jsonStr(payload, "comment", "body")) {
		return tr, nil
	}
	forkPolicy, fork, stop := p.screenForgeEvent(ctx, tr, src, ev)
	if stop {
		return tr, nil
	}
	defaultBranch := jsonStr(payload, "repository", "default_branch")
	var commit *commitEvent
	if namesCommitOnly(ev, lref) {
		ce, ignored := p.decideCommitEvent(ctx, tr, src.OrgID, ev, lref, defaultBranch)
		if ignored {
			return tr, nil
		}
		commit = &ce
	}
	set, err := p.st.GetSourceSettings(ctx, src.ID)
	if err != nil {
		return tr, fmt.Errorf("settings of source %s: %w", src.ID, err)
	}
	fg := p.forges()
	client, err := fg.GitHubClient(set)
	if err != nil {
		return tr, err
	}
	inst := jsonInt(payload, "installation", "id")

	lockRef := lref.Ref
	if lockRef == provider.HEAD {
		lockRef = defaultBranch // "" = the repository's default branch
	}
	var notes []string
	lockSource := ""
	switch {
	case commit != nil:
		// The commit's own lock may be anyone's (commitevents.go).
		notes = append(notes, commit.note)
		lockRef, lockSource = defaultBranch, "base"
	case fork:
		base, note := forkBaseLock(forkPolicy, ev, lref)
		notes = append(notes, note)
		lockRef, lockSource = base, "base"
	case lref.BaseRef != "":
		author := jsonStr(payload, "pull_request", "user", "login")
		perm, err := client.Permission(ctx, inst, repo, author)
		if err != nil {
			return tr, fmt.Errorf("permission of %q on %s: %w", author, repo, err)
		}
		if !ghapi.CanWrite(perm) {
			notes = append(notes, fmt.Sprintf("author %q has %q permission (no write access): using the lock of base branch %s", author, perm, lref.BaseRef))
			lockRef, lockSource = lref.BaseRef, "base"
		}
	}
	tr.Ref, tr.SHA = jsonStr(payload, "ref"), lockRef
	res, err := fg.Locks.Get(ctx, "github:"+src.ID, repo, lockRef, gitHubLockFetch(client, inst, repo, lockRef))
	if err != nil {
		return tr, fmt.Errorf("fetch lock of %s at %q: %w", repo, lockRef, err)
	}
	lf, err := usableLock(tr, res, orHead(lockRef), notes)
	if lf == nil {
		return tr, err
	}

	if trigger.NeedsChangedFiles(lf) {
		files, err := p.githubChangedFiles(ctx, client, inst, repo, ev, payload)
		if err != nil {
			return tr, err
		}
		ev.ChangedFiles = files
		tr.ChangedFiles = files[:min(len(files), maxTracedFiles)]
	}

	ref, sha := tr.Ref, ""
	switch ev.Type {
	case trigger.KindPush, trigger.KindTag:
		sha = jsonStr(payload, "after")
	case trigger.KindPullRequest, trigger.KindReview, trigger.KindReviewComment:
		sha = jsonStr(payload, "pull_request", "head", "sha")
		ref = "refs/heads/" + ev.SourceBranch
	default:
		if lockfetch.IsSHA(lref.Ref) {
			sha = lref.Ref
		}
	}
	if client != nil && lockfetch.IsSHA(sha) && !ghprov.IsZeroSHA(sha) {
		ev.Files = githubFiles{ctx: ctx, client: client, inst: inst, repo: repo, sha: sha}
		if ev.CommitMessage == "" && ev.Type == trigger.KindPullRequest {
			ev.LoadCommitMessage = githubCommitMessage(ctx, client, inst, repo, sha) // gates.go
		}
	}
	if ev.Type == trigger.KindPush && defaultBranch != "" && tr.Ref == "refs/heads/"+defaultBranch && !ghprov.IsZeroSHA(sha) {
		if err := p.register(ctx, tr, src, repo, jsonStr(payload, "repository", "clone_url"), tr.Ref, sha, lf); err != nil {
			return tr, err
		}
	}
	rc := RunContext{DeliveryID: d.ID, Source: src, RepoIdentifier: repo, RepoURL: jsonStr(payload, "repository", "clone_url"),
		Ref: ref, SHA: sha, TriggeredBy: ev.SenderUsername, LockFileSource: lockSource}
	return tr, p.createForgeRuns(ctx, d, tr, src, ev, lf, rc, commit, notes, b)
}

func orHead(ref string) string {
	if ref == "" {
		return "the default branch"
	}
	return ref
}

// githubChangedFiles lists an event's changed files (KiCI
// providers/github/changed-files.ts): a push compares before...after
// (branch creation or deletion ⇒ none), a pull request lists its files,
// other events have none.
func (p *Processor) githubChangedFiles(ctx context.Context, c *ghapi.Client, inst int64, repo string, ev *trigger.Event, payload map[string]any) ([]string, error) {
	switch ev.Type {
	case trigger.KindPush:
		before, after := jsonStr(payload, "before"), jsonStr(payload, "after")
		if before == "" || after == "" || ghprov.IsZeroSHA(before) || ghprov.IsZeroSHA(after) {
			return []string{}, nil
		}
		files, err := c.CompareFiles(ctx, inst, repo, before, after)
		if err != nil {
			return nil, fmt.Errorf("changed files of %s %s...%s: %w", repo, before, after, err)
		}
		return files, nil
	case trigger.KindPullRequest:
		n := jsonInt(payload, "pull_request", "number")
		if n == 0 {
			n = jsonInt(payload, "number")
		}
		files, err := c.PullFiles(ctx, inst, repo, n)
		if err != nil {
			return nil, fmt.Errorf("files of pull request %s#%d: %w", repo, n, err)
		}
		return files, nil
	}
	return []string{}, nil
}

// RegisterableTriggers are the trigger kinds matched against the
// registration index rather than per delivery (KiCI
// RegisterableTriggerType; see docs/kici-compatibility.md#triggers).
var RegisterableTriggers = []string{"kici_event", "workflow_complete", "job_complete", "generic_webhook", "schedule", "lifecycle", "webhook"}

// register replaces the registrations of (source, repo) with the lock's
// workflows, as of a push to the default branch at sha.
//
// A workflow with a job that can never pass its contexts' gates is not
// registered; the refusal is logged and added to tr's errors (tr may be
// nil) without stopping the delivery's own runs.
func (p *Processor) register(ctx context.Context, tr *Trace, src *store.Source, repo, repoURL, ref, sha string, lf *lockfile.LockFile) error {
	var regs []*store.Registration
	var refused []string
	for i := range lf.Workflows {
		wf := &lf.Workflows[i]
		if err := p.satisfiable(ctx, src.OrgID, wf); err != nil {
			refused = append(refused, fmt.Sprintf("workflow %q not registered: %v", wf.Name, err))
			continue
		}
		raw, err := json.Marshal(wf)
		if err != nil {
			return fmt.Errorf("encode workflow %q: %w", wf.Name, err)
		}
		types := make([]string, 0, len(wf.Triggers))
		for _, t := range wf.Triggers {
			types = append(types, t.Type)
		}
		regs = append(regs, &store.Registration{OrgID: src.OrgID, RoutingKey: src.RoutingKey, Provider: src.Provider,
			RepoURL: repoURL, Ref: ref, SHA: sha, WorkflowName: wf.Name, TriggerTypes: types, Workflow: raw})
	}
	if err := p.st.ReplaceRegistrations(ctx, src.ID, repo, regs); err != nil {
		return fmt.Errorf("registrations of %s: %w", repo, err)
	}
	p.log.Info("ingest: registrations refreshed", "sourceId", src.ID, "repo", repo, "sha", sha, "workflows", len(regs))
	for _, r := range refused {
		p.log.Warn("ingest: "+r, "sourceId", src.ID, "repo", repo, "sha", sha)
	}
	if tr != nil {
		tr.Errors = append(tr.Errors, refused...)
	}
	return nil
}

// satisfiable checks a workflow's jobs against the contexts they name
// (KiCI registration-time satisfiability): it refuses only what can never
// run — a named context that is disabled, or two named contexts whose
// literal branch, trigger-type or repository lists are disjoint. Names that
// match no context, and anything involving globs, are left to the
// dispatch-time gates.
func (p *Processor) satisfiable(ctx context.Context, orgID string, wf *lockfile.Workflow) error {
	for _, j := range wf.Jobs {
		if len(j.Contexts) == 0 {
			continue
		}
		bound, _, err := contexts.Resolve(ctx, p.st, orgID, j.Contexts)
		if err != nil {
			return fmt.Errorf("job %q: contexts: %w", j.Name, err)
		}
		if err := contexts.Unsatisfiable(contexts.Contexts(bound)); err != nil {
			return fmt.Errorf("job %q can never run: %w", j.Name, err)
		}
	}
	return nil
}

// registerLocal refreshes the registrations of a local source when a push
// lands on the branch its repository's HEAD points at (its default
// branch). Failures are logged, not fatal: the push's own runs still
// happen.
func (p *Processor) registerLocal(ctx context.Context, src *store.Source, repoIdent, ref, sha string, lf *lockfile.LockFile) {
	if head, ok := p.headRef(ctx, src.LocalPath); !ok || head != ref {
		return
	}
	if err := p.register(ctx, nil, src, repoIdent, "file://"+src.LocalPath, ref, sha, lf); err != nil {
		p.log.Error("ingest: register local workflows", "sourceId", src.ID, "error", err)
	}
}

// gzipBytes returns b gzipped (event-log payloads are stored compressed).
func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}
