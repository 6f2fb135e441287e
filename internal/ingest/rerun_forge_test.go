package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// wfTwoJobsJSON is workflow name with jobs build and lint (a later lock).
func wfTwoJobsJSON(name string) string {
	job := func(n string) string {
		return `{"_type":"static","name":"` + n + `","runsOn":[{"kind":"exact","value":"nowhere"}],"needs":[],"steps":[{"name":"s","run":"true"}]}`
	}
	return `{"name":"` + name + `","source":{"file":".kici/workflows/x.yaml","export":"#default"},"contentHash":"y",` +
		`"compileSchemaVersion":5,"triggers":[{"_type":"push"}],"jobs":[` + job("build") + `,` + job("lint") + `]}`
}

// finishRun marks a run failed so that it can be rerun.
func finishRun(t *testing.T, st store.Store, id string) {
	t.Helper()
	if _, err := st.UpdateRunStatus(context.Background(), id, nil, status.RunFailed, store.RunUpdate{}); err != nil {
		t.Fatal(err)
	}
}

// storedRun creates a finished run of a one-job workflow wfName directly
// (as the pipeline would have), for the error cases.
func storedRun(t *testing.T, st store.Store, tr *runs.Tracker, src *store.Source, wfName, repo, sha, deliveryID string) *store.Run {
	t.Helper()
	var wf lockfile.Workflow
	if err := json.Unmarshal([]byte(wfJSON(wfName, `[{"_type":"push"}]`)), &wf); err != nil {
		t.Fatal(err)
	}
	run, jobs, err := BuildRun(&wf, RunContext{DeliveryID: deliveryID, Source: src, RepoIdentifier: repo, Ref: "refs/heads/main", SHA: sha})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.CreateRun(context.Background(), run, jobs); err != nil {
		t.Fatal(err)
	}
	finishRun(t, st, run.ID)
	return run
}

func jobNames(t *testing.T, st store.Store, runID string) string {
	t.Helper()
	jobs, err := st.ListJobs(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs {
		names = append(names, j.JobName)
	}
	return strings.Join(names, ",")
}

// A rerun of a GitHub App source's run reads the lock at the run's SHA
// through the contents API with a token of the installation named in the
// original delivery — not the branch head's lock, which has moved on — and
// creates a linked run at the same commit; a rerun of that rerun (which has
// no delivery) finds the installation through the chain's root.
func TestRerunGitHubSourceReadsLockAtSHA(t *testing.T) {
	h := newGHHarness(t)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfJSON("ci", `[{"_type":"push"}]`)))
	id := h.post("push", "rr-1", pushPayload("refs/heads/main", shaPrev, shaMain))
	if d, _, _ := h.process(id); d.Status != store.DeliveryProcessed {
		t.Fatalf("push: %s %s", d.Status, d.Error)
	}
	orig := h.runs(id)["ci"]
	if orig == nil {
		t.Fatal("no ci run")
	}
	finishRun(t, h.st, orig.ID)

	// The branch moves on: its head's lock has a second job.
	shaNew := strings.Repeat("3", 40)
	h.fake.SetFile(ghRepo, shaNew, lockfetch.LockPath, lockJSON(wfTwoJobsJSON("ci")))
	h.fake.SetBranch(ghRepo, "main", shaNew)
	h.fake.SetBranch(ghRepo, "refs/heads/main", shaNew)
	// A restarted orchestrator: no cached lock, no cached token.
	h.proc.Forges = NewForges(0)
	contents := h.fake.CallsWithPrefix("GET /repos/acme/api/contents/")
	tokens := h.fake.Calls("POST /app/installations/9/access_tokens")

	re, err := h.proc.Rerun(h.ctx, orig.ID, "alice")
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if re.ID == orig.ID || re.SHA != shaMain || re.Ref != "refs/heads/main" || re.Provider != provider.GitHub || re.RepoIdentifier != ghRepo ||
		re.RepoURL != orig.RepoURL || re.SourceID != h.src.ID || re.OrgID != "acme" || re.TriggeredBy != "alice" || re.DeliveryID != "" {
		t.Fatalf("rerun = %+v", re)
	}
	if got := jobNames(t, h.st, re.ID); got != "build" {
		t.Fatalf("rerun jobs = %q, want the lock at %s (build), not the branch head's (build,lint)", got, shaMain)
	}
	if l, err := h.st.GetRunLink(h.ctx, re.ID); err != nil || l.ParentRunID != orig.ID || l.OriginalRunID != orig.ID {
		t.Fatalf("link = %+v, %v", l, err)
	}
	if n := h.fake.CallsWithPrefix("GET /repos/acme/api/contents/") - contents; n != 1 {
		t.Fatalf("contents requests for the rerun = %d, want 1", n)
	}
	if n := h.fake.Calls("POST /app/installations/9/access_tokens") - tokens; n != 1 {
		t.Fatalf("tokens minted for installation 9 = %d, want 1 (the installation of the original delivery)", n)
	}

	// Rerun of the rerun: no delivery of its own; installation 9 comes from
	// the root's delivery.
	finishRun(t, h.st, re.ID)
	h.proc.Forges = NewForges(0)
	re2, err := h.proc.Rerun(h.ctx, re.ID, "bob")
	if err != nil {
		t.Fatalf("rerun of the rerun: %v", err)
	}
	if re2.SHA != shaMain || jobNames(t, h.st, re2.ID) != "build" {
		t.Fatalf("second rerun = %+v, jobs %q", re2, jobNames(t, h.st, re2.ID))
	}
	if l, _ := h.st.GetRunLink(h.ctx, re2.ID); l == nil || l.ParentRunID != re.ID || l.OriginalRunID != orig.ID {
		t.Fatalf("second link = %+v", l)
	}
	if n := h.fake.Calls("POST /app/installations/9/access_tokens") - tokens; n != 2 {
		t.Fatalf("tokens minted for installation 9 = %d after two reruns, want 2", n)
	}
}

// A token (non-App) GitHub source reruns without any installation id.
func TestRerunGitHubTokenSource(t *testing.T) {
	h := newGHHarness(t)
	h.fake.Token = "ghp_rerun"
	set, _ := h.st.GetSourceSettings(h.ctx, h.src.ID)
	set.GitHub = &store.GitHubConfig{APIBaseURL: h.fake.URL, Token: "ghp_rerun"}
	if err := h.st.PutSourceSettings(h.ctx, set); err != nil {
		t.Fatal(err)
	}
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfTwoJobsJSON("ci")))
	orig := storedRun(t, h.st, h.tr, h.src, "ci", ghRepo, shaMain, "")
	re, err := h.proc.Rerun(h.ctx, orig.ID, "alice")
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if re.SHA != shaMain || jobNames(t, h.st, re.ID) != "build,lint" {
		t.Fatalf("rerun = %+v, jobs %q", re, jobNames(t, h.st, re.ID))
	}
	if h.fake.CallsWithPrefix("POST /app/") != 0 {
		t.Fatal("a token source minted App tokens")
	}
}

// Reruns that cannot be built answer ErrRerunUnavailable with the reason:
// source removed, lock gone at the SHA, workflow no longer in the lock, no
// installation id for an App source, forge unreachable.
func TestRerunGitHubErrors(t *testing.T) {
	h := newGHHarness(t)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfJSON("ci", `[{"_type":"push"}]`)))
	id := h.post("push", "rr-e", pushPayload("refs/heads/main", shaPrev, shaMain))
	shaGone := strings.Repeat("4", 40)
	gone := &store.Source{ID: "src-removed", OrgID: "acme", Provider: provider.GitHub}
	cases := []struct {
		name string
		run  *store.Run
		want string
	}{
		{"source removed", storedRun(t, h.st, h.tr, gone, "ci", ghRepo, shaMain, id), "its source was removed"},
		{"lock gone", storedRun(t, h.st, h.tr, h.src, "ci", ghRepo, shaGone, id), "is gone from acme/api at that commit"},
		{"workflow dropped", storedRun(t, h.st, h.tr, h.src, "old", ghRepo, shaMain, id), `workflow "old" is not in the lock file at ` + shaMain},
		{"no installation", storedRun(t, h.st, h.tr, h.src, "ci", ghRepo, shaMain, ""), "no GitHub App installation id"},
	}
	for _, c := range cases {
		re, err := h.proc.Rerun(h.ctx, c.run.ID, "alice")
		if !errors.Is(err, ErrRerunUnavailable) || !strings.Contains(err.Error(), c.want) || re != nil {
			t.Errorf("%s: %v, want ErrRerunUnavailable %q", c.name, err, c.want)
		}
	}
	// Forge unreachable: the API base URL answers nothing.
	dead := httptest.NewServer(nil)
	dead.Close()
	set, _ := h.st.GetSourceSettings(h.ctx, h.src.ID)
	set.GitHub.APIBaseURL = dead.URL
	if err := h.st.PutSourceSettings(h.ctx, set); err != nil {
		t.Fatal(err)
	}
	h.proc.Forges = NewForges(0)
	run := storedRun(t, h.st, h.tr, h.src, "ci", ghRepo, shaMain, id)
	if _, err := h.proc.Rerun(h.ctx, run.ID, "alice"); !errors.Is(err, ErrRerunUnavailable) || !strings.Contains(err.Error(), "could not be reached") {
		t.Errorf("forge unreachable: %v", err)
	}
	all, _, _ := h.st.ListRuns(h.ctx, store.RunFilter{Limit: 100})
	if len(all) != len(cases)+1 {
		t.Errorf("runs = %d, want %d: a refused rerun must create nothing", len(all), len(cases)+1)
	}
}

// A rerun of a universal-git source's run fetches the lock at the run's SHA
// with git from the forge (a real repository over file://), though the
// branch has moved on to a commit whose lock differs; a removed forge
// repository and a generic source without git configuration are refused.
func TestRerunUniversalGitSource(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(filepath.Join(work, ".kici"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, ".kici/kici.lock.json"), lockJSON(wfJSON("ci", `[{"_type":"push"}]`)), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "add", "-A")
	gitIn(t, work, "commit", "-qm", "lock")
	sha := gitIn(t, work, "rev-parse", "HEAD")
	st, src := universalSource(t, root, work, "gitea", "gitea")
	forge := filepath.Join(root, "forge", "acme", "app.git") // the bare repository universalSource published
	tr := runs.NewTracker(st, &countingEnqueuer{st: st}, nil, runs.TrackerDeps{})
	proc := NewProcessor(st, tr, nil, ProcessorDeps{})
	payload, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": sha,
		"repository": map[string]any{"full_name": "acme/app", "default_branch": "main"},
		"sender":     map[string]any{"login": "dev", "username": "dev"}})
	id := "generic:acme:src-u:r1"
	if err := st.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: src.ID, OrgID: "acme", Event: "push", Payload: payload, ReceivedAt: time.Now()},
		&store.EventLogEntry{OrgID: "acme", Source: "direct", Provider: provider.Generic}); err != nil {
		t.Fatal(err)
	}
	if err := proc.Process(ctx, id); err != nil {
		t.Fatal(err)
	}
	runs, _, _ := st.ListRuns(ctx, store.RunFilter{DeliveryID: id})
	if len(runs) != 1 || runs[0].SHA != sha {
		t.Fatalf("runs of the push = %+v", runs)
	}
	orig := runs[0]
	finishRun(t, st, orig.ID)

	// The branch moves on in the forge with a lock of two jobs.
	if err := os.WriteFile(filepath.Join(work, ".kici/kici.lock.json"), lockJSON(wfTwoJobsJSON("ci")), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "commit", "-qam", "second job")
	gitIn(t, work, "push", "-q", forge, "main")
	proc.Forges = NewForges(0) // no cached lock

	re, err := proc.Rerun(ctx, orig.ID, "alice")
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if re.SHA != sha || re.Ref != "refs/heads/main" || re.Provider != provider.Generic || re.RepoIdentifier != "acme/app" || re.SourceID != src.ID || re.TriggeredBy != "alice" {
		t.Fatalf("rerun = %+v", re)
	}
	if got := jobNames(t, st, re.ID); got != "build" {
		t.Fatalf("rerun jobs = %q, want the lock at %s (build), not the branch head's", got, sha)
	}
	if l, err := st.GetRunLink(ctx, re.ID); err != nil || l.ParentRunID != orig.ID {
		t.Fatalf("link = %+v, %v", l, err)
	}

	// A commit of the forge without a lock: the lock is gone at that SHA.
	gitIn(t, work, "rm", "-q", ".kici/kici.lock.json")
	gitIn(t, work, "commit", "-qm", "drop lock")
	gitIn(t, work, "push", "-q", forge, "main")
	noLock := storedRun(t, st, tr, src, "ci", "acme/app", gitIn(t, work, "rev-parse", "HEAD"), "")
	if _, err := proc.Rerun(ctx, noLock.ID, "alice"); !errors.Is(err, ErrRerunUnavailable) || !strings.Contains(err.Error(), "is gone from acme/app") {
		t.Errorf("lock gone: %v", err)
	}

	// The forge repository disappears: unreachable, not "gone".
	finishRun(t, st, re.ID)
	if err := os.RemoveAll(forge); err != nil {
		t.Fatal(err)
	}
	proc.Forges = NewForges(0)
	if _, err := proc.Rerun(ctx, re.ID, "alice"); !errors.Is(err, ErrRerunUnavailable) || !strings.Contains(err.Error(), "could not be reached") {
		t.Errorf("forge removed: %v", err)
	}

	// A plain generic source (no git configuration) has no lock to read.
	plain := &store.Source{ID: "src-plain", OrgID: "acme", Name: "hooks", Provider: provider.Generic, RoutingKey: "generic:acme:hooks", VerificationMethod: "none", Enabled: true}
	if err := st.CreateSource(ctx, plain); err != nil {
		t.Fatal(err)
	}
	pr := storedRun(t, st, tr, plain, "ci", "acme/app", sha, "")
	if _, err := proc.Rerun(ctx, pr.ID, "alice"); !errors.Is(err, ErrRerunUnavailable) || !strings.Contains(err.Error(), "has no git configuration") {
		t.Errorf("plain generic source: %v", err)
	}
}
