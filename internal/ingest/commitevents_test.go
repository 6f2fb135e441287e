package ingest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/fixtures"
)

// statusDelivery is GitHub's recorded status event aimed at the
// harness's repository: commit sha, status context, and the base
// repository's branches that contain sha.
func statusDelivery(t *testing.T, sha, context string, branches ...string) []byte {
	t.Helper()
	b, err := fixtures.GitHubStatus(fixtures.StatusEvent{Repo: ghRepo, DefaultBranch: "main", Installation: 9,
		SHA: sha, Context: context, Branches: branches})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The attack: a fork's head commit carries a planted lock whose workflow
// runs on `status`; any status posted on that commit (a third-party CI,
// or kici's own "held" status) must not run that lock, and must not run
// anything with the trusted tier. The default branch's lock is used, the
// run is untrusted (so the fork hold and the secret scope apply), and
// kici's own statuses start nothing.
func TestGitHubStatusEventNeverRunsTheCommitsLock(t *testing.T) {
	h := newGHHarness(t)
	on := `[{"_type":"status"}]`
	h.fake.SetFile(ghRepo, shaHead, lockfetch.LockPath, lockJSON(wfJSON("planted", on)))
	h.fake.SetFile(ghRepo, "main", lockfetch.LockPath, lockJSON(wfJSON("from-default", on)))
	h.fake.SetBranch(ghRepo, "main", shaMain)

	// A commit that is on no branch of the repository (a fork's head).
	id := h.post("status", "st-fork", statusDelivery(t, shaHead, "ci/external"))
	d, tr, _ := h.process(id)
	runs := h.runs(id)
	if d.Status != store.DeliveryProcessed || len(runs) != 1 || runs["from-default"] == nil {
		t.Fatalf("status on a fork head: %s (%s), runs %v; want only the default branch's workflow", d.Status, d.Error, runs)
	}
	r := runs["from-default"]
	if r.TrustTier != store.TrustUnknown || r.LockFileSource != "base" || r.SHA != shaHead {
		t.Fatalf("run tier %q lock %q sha %s: want unknown, base, the status's commit", r.TrustTier, r.LockFileSource, r.SHA)
	}
	if !strings.Contains(tr.Summary, "on no branch of the repository") || !strings.Contains(tr.Summary, "lock of main") {
		t.Fatalf("summary %q does not explain the decision", tr.Summary)
	}

	// A commit on a branch of the repository: trusted, still the default
	// branch's lock.
	id = h.post("status", "st-branch", statusDelivery(t, shaMain, "ci/external", "main"))
	d, _, _ = h.process(id)
	runs = h.runs(id)
	if d.Status != store.DeliveryProcessed || len(runs) != 1 || runs["from-default"] == nil ||
		runs["from-default"].TrustTier != store.TrustTrusted {
		t.Fatalf("status on a branch commit: %s, runs %v; want from-default, trusted", d.Status, runs)
	}

	// kici's own status posts never start a run, on any commit.
	for _, sha := range []string{shaHead, shaMain} {
		id = h.post("status", "st-own-"+sha[:4], statusDelivery(t, sha, "kici/ci/build", "main"))
		d, tr, _ = h.process(id)
		if runs := h.runs(id); d.Status != store.DeliveryProcessed || len(runs) != 0 || tr.Summary != ownStatusSummary {
			t.Fatalf("kici's own status on %s: %s, runs %v, summary %q", sha, d.Status, runs, tr.Summary)
		}
	}
}

// Under fork policy "ignore", a status on a commit that is on no branch is
// dropped like a fork pull request.
func TestGitHubStatusEventForkPolicyIgnore(t *testing.T) {
	h := newGHHarness(t)
	h.fake.SetFile(ghRepo, "main", lockfetch.LockPath, lockJSON(wfJSON("from-default", `[{"_type":"status"}]`)))
	if _, err := h.st.UpdateTrustPolicyAudited(h.ctx, "acme", store.TrustPolicy{OrgID: "acme", ApprovalExpirySeconds: 3600},
		func(p *store.TrustPolicy) error { p.ForkPolicy = store.ForkIgnore; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	id := h.post("status", "st-ignored", statusDelivery(t, shaHead, "ci/external"))
	d, tr, _ := h.process(id)
	if runs := h.runs(id); d.Status != store.DeliveryProcessed || len(runs) != 0 || !strings.Contains(tr.Summary, `fork policy is "ignore"`) {
		t.Fatalf("status under ignore: %s, runs %v, summary %q", d.Status, runs, tr.Summary)
	}
}

// The same attack through a universal-git source with the github-repo
// preset (the lock fetched with git): the planted commit's lock is never
// used, the run is untrusted and built from the default branch's lock, and
// kici's own status starts nothing.
func TestUniversalStatusEventNeverRunsTheCommitsLock(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	gitIn(t, root, "init", "-q", "-b", "main", work)
	writeLock := func(lock []byte) string {
		if err := os.MkdirAll(filepath.Join(work, ".kici"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, ".kici/kici.lock.json"), lock, 0o644); err != nil {
			t.Fatal(err)
		}
		gitIn(t, work, "add", "-A")
		gitIn(t, work, "commit", "-qm", "lock")
		return gitIn(t, work, "rev-parse", "HEAD")
	}
	on := `[{"_type":"status"}]`
	writeLock(lockJSON(wfJSON("from-default", on)))
	gitIn(t, work, "checkout", "-q", "-b", "planted")
	planted := writeLock(lockJSON(wfJSON("planted", on)))
	gitIn(t, work, "checkout", "-q", "main")
	st, src := universalSource(t, root, work, "gh-repo", "github-repo")
	proc := NewProcessor(st, runs.NewTracker(st, &countingEnqueuer{st: st}, nil, runs.TrackerDeps{}), nil, ProcessorDeps{})
	deliver := func(id, context string) []*store.Run {
		body, err := fixtures.GitHubStatus(fixtures.StatusEvent{Repo: "acme/app", DefaultBranch: "main", SHA: planted, Context: context})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: src.ID, OrgID: "acme", Event: "status", Payload: body, ReceivedAt: time.Now()},
			&store.EventLogEntry{OrgID: "acme", Source: "direct", Provider: provider.Generic}); err != nil {
			t.Fatal(err)
		}
		if err := proc.Process(ctx, id); err != nil {
			t.Fatal(err)
		}
		if d, _ := st.GetDelivery(ctx, id); d.Status != store.DeliveryProcessed {
			t.Fatalf("delivery %s: %s %s", id, d.Status, d.Error)
		}
		runs, _, err := st.ListRuns(ctx, store.RunFilter{DeliveryID: id})
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	runs := deliver("generic:acme:src-u:s1", "ci/external")
	if len(runs) != 1 || runs[0].WorkflowName != "from-default" || runs[0].TrustTier != store.TrustUnknown ||
		runs[0].LockFileSource != "base" || runs[0].SHA != planted {
		t.Fatalf("runs = %+v, want one untrusted from-default run on the planted commit", runs)
	}
	if runs := deliver("generic:acme:src-u:s2", "kici/ci/build"); len(runs) != 0 {
		t.Fatalf("kici's own status started %d runs", len(runs))
	}
}
