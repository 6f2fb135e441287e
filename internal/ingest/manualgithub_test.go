package ingest

import (
	"errors"
	"strings"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/store"
)

// dispatchTriggers declares a dispatch trigger with a required string input
// "target" and a boolean "dry" that defaults to true.
const dispatchTriggers = `[{"_type":"dispatch","inputs":{"target":{"type":"string"},"dry":{"type":"boolean","default":true}}}]`

// A manual run on a GitHub App source, which has no delivery to take an
// installation id from: the installation is looked up for the repository,
// a branch name is resolved through the API to its head commit, the lock
// is read at that commit (not the default branch's), and the run carries
// the typed inputs. Without a ref the repository's default branch runs; an
// unknown branch is ErrRefNotFound naming the ref and the repository.
func TestManualRunGitHubAppSourceByBranch(t *testing.T) {
	h := newGHHarness(t)
	h.fake.SetInstallation(ghRepo, 9)
	h.fake.SetDefaultBranch(ghRepo, "trunk")
	h.fake.SetBranch(ghRepo, "trunk", shaMain)
	h.fake.SetBranch(ghRepo, "release", shaHead)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfJSON("deploy-main", dispatchTriggers)))
	h.fake.SetFile(ghRepo, shaHead, lockfetch.LockPath, lockJSON(wfJSON("deploy", dispatchTriggers)))

	run, err := h.proc.StartManualRun(h.ctx, ManualRun{SourceID: h.src.ID, Workflow: "deploy", Ref: "release", Repo: ghRepo,
		Inputs: map[string]any{"target": "prod"}, By: "ops"})
	if err != nil {
		t.Fatalf("manual run by branch: %v", err)
	}
	if run.SHA != shaHead || run.Ref != "refs/heads/release" || run.RepoIdentifier != ghRepo || run.TriggerType != apitypes.TriggerManual {
		t.Fatalf("run at %s %s %s (%s), want %s refs/heads/release %s manual", run.SHA, run.Ref, run.RepoIdentifier, run.TriggerType, shaHead, ghRepo)
	}
	if run.RepoURL != "https://github.com/acme/api.git" {
		t.Fatalf("clone URL %q", run.RepoURL)
	}
	rc, err := h.st.GetRunContext(h.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Inputs["target"] != "prod" || rc.Inputs["dry"] != true {
		t.Fatalf("inputs %v, want target=prod dry=true", rc.Inputs)
	}
	if got := jobNames(t, h.st, run.ID); got != "build" {
		t.Fatalf("jobs %q", got)
	}
	if n := h.fake.Calls("GET /repos/acme/api/installation"); n != 1 {
		t.Fatalf("installation looked up %d times", n)
	}

	// No ref: the default branch, whose lock has workflow deploy-main.
	def, err := h.proc.StartManualRun(h.ctx, ManualRun{SourceID: h.src.ID, Workflow: "deploy-main", Repo: ghRepo,
		Inputs: map[string]any{"target": "staging", "dry": "false"}})
	if err != nil {
		t.Fatalf("manual run on the default branch: %v", err)
	}
	if def.SHA != shaMain || def.Ref != "refs/heads/trunk" {
		t.Fatalf("default-branch run at %s %s, want %s refs/heads/trunk", def.SHA, def.Ref, shaMain)
	}
	// The release branch's lock does not have deploy-main: the lock was
	// read at the branch's commit.
	if _, err := h.proc.StartManualRun(h.ctx, ManualRun{SourceID: h.src.ID, Workflow: "deploy-main", Ref: "release", Repo: ghRepo,
		Inputs: map[string]any{"target": "x"}}); !errors.Is(err, ErrManualRunUnavailable) || !strings.Contains(err.Error(), shaHead) {
		t.Fatalf("deploy-main at release: %v", err)
	}

	_, err = h.proc.StartManualRun(h.ctx, ManualRun{SourceID: h.src.ID, Workflow: "deploy", Ref: "no-such-branch", Repo: ghRepo,
		Inputs: map[string]any{"target": "prod"}})
	if !errors.Is(err, ErrRefNotFound) || !strings.Contains(err.Error(), `"no-such-branch"`) || !strings.Contains(err.Error(), ghRepo) {
		t.Fatalf("unknown branch: %v", err)
	}
	// A missing required input is refused by name (through the same path).
	_, err = h.proc.StartManualRun(h.ctx, ManualRun{SourceID: h.src.ID, Workflow: "deploy", Ref: "release", Repo: ghRepo})
	if !errors.Is(err, ErrInvalidInputs) || !strings.Contains(err.Error(), `"target"`) {
		t.Fatalf("missing input: %v", err)
	}
	// A repository the App is not installed on.
	_, err = h.proc.StartManualRun(h.ctx, ManualRun{SourceID: h.src.ID, Workflow: "deploy", Ref: "release", Repo: "acme/other",
		Inputs: map[string]any{"target": "prod"}})
	if !errors.Is(err, ErrManualRunUnavailable) || !strings.Contains(err.Error(), "not installed on acme/other") {
		t.Fatalf("not installed: %v", err)
	}
	// The refused requests created nothing.
	if _, total, err := h.st.ListRuns(h.ctx, store.RunFilter{}); err != nil || total != 2 {
		t.Fatalf("%d runs (%v), want the 2 started", total, err)
	}
}
