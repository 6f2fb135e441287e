package pipeline

import (
	"encoding/json"
	"testing"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/store"
)

// TestGitHubPushGates: on a GitHub push the requires gate reads the file
// at the pushed commit through the contents API, and the commitMessage
// gate reads head_commit.message.
func TestGitHubPushGates(t *testing.T) {
	h := newGHHarness(t)
	lock := lockJSON(
		wfJSON("needs-flag", `[{"_type":"push","requires":[{"file":"deploy.json","format":"json","match":{"$.enabled":true}}]}]`),
		wfJSON("feat-only", `[{"_type":"push","commitMessage":{"matches":[{"type":"regex","pattern":"^feat"}]}}]`),
	)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lock)
	h.fake.SetFile(ghRepo, shaMain, "deploy.json", []byte(`{"enabled": true}`))
	var payload map[string]any
	if err := json.Unmarshal(pushPayload("refs/heads/main", shaPrev, shaMain), &payload); err != nil {
		t.Fatal(err)
	}
	payload["head_commit"].(map[string]any)["message"] = "fix: x"
	body, _ := json.Marshal(payload)
	id := h.post("push", "d-gates", body)
	d, tr, _ := h.process(id)
	if d.Status != store.DeliveryProcessed {
		t.Fatalf("delivery: %s %s", d.Status, d.Error)
	}
	runs := h.runs(id)
	if len(runs) != 1 || runs["needs-flag"] == nil {
		t.Fatalf("runs = %v, want needs-flag only (trace %+v)", runs, tr.Workflows)
	}
	last := tr.Workflows[1].Checks[len(tr.Workflows[1].Checks)-1]
	if last.Check != "commit message matches" || last.Value != "fix: x" {
		t.Fatalf("feat-only stopped by %+v", last)
	}
}
