package ingest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/trustpolicy"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// universalSource publishes work as the bare repository acme/app.git under
// root/forge, opens a SQLite store in a temp dir and creates the generic
// source src-u of org acme, named name, whose git URL template points
// there; preset names the forge's URL layout ("gitea", "github-repo"). The
// store closes with the test.
func universalSource(t *testing.T, root, work, name, preset string) (*sqlite.Store, *store.Source) {
	t.Helper()
	forge := filepath.Join(root, "forge")
	if err := os.MkdirAll(filepath.Join(forge, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "clone", "-q", "--bare", work, filepath.Join(forge, "acme", "app.git"))
	ctx := context.Background()
	st := teststore.SQLite(t)
	src := &store.Source{ID: "src-u", OrgID: "acme", Name: name, Provider: provider.Generic, RoutingKey: "generic:acme:src-u", VerificationMethod: "none", Enabled: true}
	if err := st.CreateSourceWithSettings(ctx, src, &store.SourceSettings{Git: &store.GitConfig{Preset: preset,
		GitURLTemplate: "file://" + forge + "/{repo}.git"}}, nil); err != nil {
		t.Fatal(err)
	}
	return st, src
}

// universalWork starts the git work tree root/work on branch main with
// lock as its .kici/kici.lock.json, not yet committed, and returns its path.
func universalWork(t *testing.T, root string, lock []byte) string {
	t.Helper()
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(filepath.Join(work, ".kici"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, ".kici/kici.lock.json"), lock, 0o644); err != nil {
		t.Fatal(err)
	}
	return work
}

// deliverUniversal stores delivery id (event, payload) for src, has proc
// process it, and returns the delivery as stored and the runs it made.
func deliverUniversal(t *testing.T, st store.Store, proc *Processor, src *store.Source, id, event string, payload []byte) (*store.Delivery, []*store.Run) {
	t.Helper()
	ctx := context.Background()
	if err := st.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: src.ID, OrgID: src.OrgID, Event: event, Payload: payload, ReceivedAt: time.Now()},
		&store.EventLogEntry{OrgID: src.OrgID, Source: "direct", Provider: src.Provider}); err != nil {
		t.Fatal(err)
	}
	if err := proc.Process(ctx, id); err != nil {
		t.Fatal(err)
	}
	d, _ := st.GetDelivery(ctx, id)
	runs, _, _ := st.ListRuns(ctx, store.RunFilter{DeliveryID: id})
	return d, runs
}

// A Gitea push to a universal-git source: the lock is fetched with git from
// the URL built from the template, the push workflow runs at the pushed
// commit, path filters use the payload's commit file lists, and the
// default-branch push registers the workflows.
func TestUniversalGiteaPushFetchesLockWithGit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	work := universalWork(t, root, lockJSON(
		wfJSON("ci", `[{"_type":"push","branches":[{"type":"glob","pattern":"main"}]}]`),
		wfJSON("docs", `[{"_type":"push","paths":["docs/**"]}]`),
		wfJSON("go", `[{"_type":"push","paths":["**/*.go"]}]`),
	))
	gitIn(t, work, "add", "-A")
	gitIn(t, work, "commit", "-qm", "lock")
	sha := gitIn(t, work, "rev-parse", "HEAD")
	st, src := universalSource(t, root, work, "gitea", "gitea")
	proc := NewProcessor(st, runs.NewTracker(st, &countingEnqueuer{st: st}, nil, runs.TrackerDeps{}), nil, ProcessorDeps{})
	payload, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": sha,
		"repository": map[string]any{"full_name": "acme/app", "default_branch": "main", "clone_url": "https://gitea.example/acme/app.git"},
		"pusher":     map[string]any{"login": "dev", "username": "dev"}, "sender": map[string]any{"login": "dev", "username": "dev"},
		"commits": []any{map[string]any{"id": sha, "added": []any{"cmd/main.go"}, "modified": []any{"README.md"}, "removed": []any{}}}})
	d, runs := deliverUniversal(t, st, proc, src, "generic:acme:src-u:d1", "push", payload)
	if d.Status != store.DeliveryProcessed {
		t.Fatalf("delivery %s: %s", d.Status, d.Error)
	}
	names := map[string]*store.Run{}
	for _, r := range runs {
		names[r.WorkflowName] = r
	}
	if len(runs) != 2 || names["ci"] == nil || names["go"] == nil {
		t.Fatalf("runs = %v, want ci and go (docs/** matches no pushed file)", names)
	}
	if r := names["ci"]; r.SHA != sha || r.RepoIdentifier != "acme/app" || !strings.HasSuffix(r.RepoURL, "/forge/acme/app.git") {
		t.Fatalf("run = %+v", r)
	}
	regs, _ := st.ListRegistrations(ctx, store.RegistrationFilter{RepoIdentifier: "acme/app"})
	if len(regs) != 3 {
		t.Fatalf("registrations = %d, want 3", len(regs))
	}

	// A repository name that would escape the template is refused.
	bad, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": sha,
		"repository": map[string]any{"full_name": "acme/../../etc", "default_branch": "main"}})
	if d, _ := deliverUniversal(t, st, proc, src, "generic:acme:src-u:d2", "push", bad); d.Status != store.DeliveryFailed || !strings.Contains(d.Error, "invalid repository name") {
		t.Fatalf("hostile repo name: %s %q", d.Status, d.Error)
	}
}

// A Gitea pull request from a fork is under the org's fork policy like a
// GitHub one: the base branch's lock, trust tier unknown (so it is held by
// the dispatch gate), and dropped under fork policy ignore.
func TestUniversalForkPullRequestUnderTrustPolicy(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	pr := `[{"_type":"pr","events":["opened"]}]`
	work := universalWork(t, root, lockJSON(wfJSON("from-base", pr)))
	gitIn(t, work, "add", "-A")
	gitIn(t, work, "commit", "-qm", "base")
	baseSHA := gitIn(t, work, "rev-parse", "HEAD")
	gitIn(t, work, "checkout", "-q", "-b", "fork")
	if err := os.WriteFile(filepath.Join(work, ".kici/kici.lock.json"), lockJSON(wfJSON("from-head", pr)), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "commit", "-qam", "fork")
	headSHA := gitIn(t, work, "rev-parse", "HEAD")
	st, src := universalSource(t, root, work, "gitea", "gitea")
	tracker := runs.NewTracker(st, &countingEnqueuer{st: st}, nil, runs.TrackerDeps{Gate: approval.NewGate(st, func(ctx context.Context, org string) (store.TrustPolicy, error) {
		p, _, err := trustpolicy.Effective(ctx, st, org)
		return p, err
	}, nil)})
	proc := NewProcessor(st, tracker, nil, ProcessorDeps{Decider: approval.NewDecider(st, nil).Decide})
	payload, _ := json.Marshal(map[string]any{"action": "opened", "number": 3,
		"pull_request": map[string]any{"number": 3, "user": map[string]any{"login": "mallory"},
			"head": map[string]any{"ref": "fork", "sha": headSHA, "repo": map[string]any{"full_name": "mallory/app"}},
			"base": map[string]any{"ref": "main", "sha": baseSHA, "repo": map[string]any{"full_name": "acme/app"}}},
		"repository": map[string]any{"full_name": "acme/app", "default_branch": "main"},
		"sender":     map[string]any{"login": "mallory", "username": "mallory"}})
	deliverAs := func(id, event string, payload []byte) (*store.Delivery, []*store.Run) {
		t.Helper()
		return deliverUniversal(t, st, proc, src, id, event, payload)
	}
	deliver := func(id string) (*store.Delivery, []*store.Run) { return deliverAs(id, "pull_request", payload) }
	d, runs := deliver("generic:acme:src-u:pr1")
	if d.Status != store.DeliveryProcessed || len(runs) != 1 {
		t.Fatalf("delivery %s (%s), %d runs", d.Status, d.Error, len(runs))
	}
	if r := runs[0]; r.WorkflowName != "from-base" || r.TrustTier != store.TrustUnknown || r.LockFileSource != "base" || r.SHA != headSHA {
		t.Fatalf("run %+v: want the base lock, trust tier unknown, the fork's head", r)
	}
	pending := func() int {
		hs, _ := st.ListHeldRuns(ctx, store.HeldRunFilter{RunID: runs[0].ID, Statuses: []hold.Status{hold.Pending}})
		return len(hs)
	}
	if pending() != 1 {
		t.Fatal("the fork run is not held")
	}
	// A `/kici approve` comment by a Gitea member with CI trust write.
	if err := st.PutDirectoryMemberAudited(ctx, &store.DirectoryMember{OrgID: "acme", UserID: "gal", Provider: "gitea",
		ProviderUserID: "31", ProviderUsername: "gal", CITrust: store.CITrustWrite}, &store.AccessLogEntry{Action: "trust_directory.updated"}); err != nil {
		t.Fatal(err)
	}
	comment, _ := json.Marshal(map[string]any{"action": "created", "is_pull": true,
		"issue":      map[string]any{"number": 3},
		"comment":    map[string]any{"body": "/kici approve " + runs[0].ID},
		"repository": map[string]any{"full_name": "acme/app", "default_branch": "main"},
		"sender":     map[string]any{"login": "gal", "username": "gal", "id": 31}})
	if d, _ := deliverAs("generic:acme:src-u:c1", "issue_comment", comment); d.Status != store.DeliveryProcessed || pending() != 0 {
		t.Fatalf("gitea /kici approve: delivery %s (%s), pending holds %d", d.Status, d.Error, pending())
	}

	if _, err := st.UpdateTrustPolicyAudited(ctx, "acme", store.TrustPolicy{ForkPolicy: store.ForkHold, ApprovalExpirySeconds: 3600}, func(p *store.TrustPolicy) error {
		p.ForkPolicy = store.ForkIgnore
		return nil
	}, &store.AccessLogEntry{Action: "trust_policy.updated"}); err != nil {
		t.Fatal(err)
	}
	d, runs = deliver("generic:acme:src-u:pr2")
	if d.Status != store.DeliveryProcessed || len(runs) != 0 {
		t.Fatalf("under ignore: delivery %s, %d runs", d.Status, len(runs))
	}
}
