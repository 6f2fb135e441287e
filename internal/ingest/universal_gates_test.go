package ingest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// TestUniversalGatesReadTheCommitThroughGit: on a Gitea source the
// `requires` gate reads the file at the pushed commit, and a pull
// request's commitMessage and `[skip ci]` gates read its head commit's
// message, both through git from the source's clone URL (the payload of a
// pull request carries no message).
func TestUniversalGatesReadTheCommitThroughGit(t *testing.T) {
	root := t.TempDir()
	work := universalWork(t, root, lockJSON(
		wfJSON("deploy-enabled", `[{"_type":"push","requires":[{"file":"deploy.json","format":"json","match":{"$.enabled":true}}]}]`),
		wfJSON("deploy-disabled", `[{"_type":"push","requires":[{"file":"deploy.json","format":"json","match":{"$.enabled":false}}]}]`),
		wfJSON("pr-feat", `[{"_type":"pr","commitMessage":{"matches":[{"type":"regex","pattern":"^feat"}]}}]`),
		wfJSON("pr-any", `[{"_type":"pr"}]`),
	))
	if err := os.WriteFile(filepath.Join(work, "deploy.json"), []byte(`{"enabled": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "add", "-A")
	gitIn(t, work, "commit", "-qm", "fix: lock")
	mainSHA := gitIn(t, work, "rev-parse", "HEAD")
	gitIn(t, work, "checkout", "-q", "-b", "feature")
	gitIn(t, work, "commit", "-q", "--allow-empty", "-m", "feat: widgets")
	featSHA := gitIn(t, work, "rev-parse", "HEAD")
	gitIn(t, work, "checkout", "-q", "-b", "chore")
	gitIn(t, work, "commit", "-q", "--allow-empty", "-m", "chore: tidy [skip ci]")
	choreSHA := gitIn(t, work, "rev-parse", "HEAD")
	st, src := universalSource(t, root, work, "gitea", "gitea")
	gitIn(t, root, "-C", filepath.Join(root, "forge", "acme", "app.git"), "fetch", "-q", work, "feature:feature", "chore:chore")
	proc := NewProcessor(st, runs.NewTracker(st, &countingEnqueuer{st: st}, nil, runs.TrackerDeps{}), nil, ProcessorDeps{})
	deliver := func(id, event string, body map[string]any) (map[string]bool, *store.Delivery) {
		t.Helper()
		payload, _ := json.Marshal(body)
		d, runs := deliverUniversal(t, st, proc, src, id, event, payload)
		names := map[string]bool{}
		for _, r := range runs {
			names[r.WorkflowName] = true
		}
		return names, d
	}
	repo := map[string]any{"full_name": "acme/app", "default_branch": "main"}
	sender := map[string]any{"login": "dev", "username": "dev"}
	runs, d := deliver("generic:acme:src-u:push", "push", map[string]any{"ref": "refs/heads/main", "before": strings.Repeat("0", 40),
		"after": mainSHA, "repository": repo, "pusher": sender, "sender": sender})
	if d.Status != store.DeliveryProcessed || len(runs) != 1 || !runs["deploy-enabled"] {
		t.Fatalf("push: delivery %s (%s), runs %v; want deploy-enabled only (deploy.json read at the commit)", d.Status, d.Error, runs)
	}
	pr := func(id, head, sha string) map[string]bool {
		t.Helper()
		runs, d := deliver(id, "pull_request", map[string]any{"action": "opened", "number": 4,
			"pull_request": map[string]any{"number": 4, "user": map[string]any{"login": "dev"},
				"head": map[string]any{"ref": head, "sha": sha, "repo": repo},
				"base": map[string]any{"ref": "main", "sha": mainSHA, "repo": repo}},
			"repository": repo, "sender": sender})
		if d.Status != store.DeliveryProcessed {
			t.Fatalf("pr %s: delivery %s (%s)", head, d.Status, d.Error)
		}
		return runs
	}
	if runs := pr("generic:acme:src-u:pr-feat", "feature", featSHA); len(runs) != 2 || !runs["pr-feat"] || !runs["pr-any"] {
		t.Errorf("pull request whose head says \"feat: widgets\": runs %v, want pr-feat and pr-any", runs)
	}
	if runs := pr("generic:acme:src-u:pr-chore", "chore", choreSHA); len(runs) != 0 {
		t.Errorf("pull request whose head says [skip ci]: runs %v, want none", runs)
	}
}
