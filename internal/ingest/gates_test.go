package ingest

import (
	"encoding/json"
	"strings"
	"testing"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
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

// TestGitHubPullRequestCommitMessageGates: a pull request's payload has
// no commit message, so its commitMessage and `[skip ci]` gates read the
// head commit's message through the git commits API.
func TestGitHubPullRequestCommitMessageGates(t *testing.T) {
	h := newGHHarness(t)
	lock := lockJSON(
		wfJSON("pr-feat", `[{"_type":"pr","commitMessage":{"matches":[{"type":"regex","pattern":"^feat"}]}}]`),
		wfJSON("pr-any", `[{"_type":"pr"}]`),
	)
	h.fake.SetFile(ghRepo, shaHead, lockfetch.LockPath, lock)
	h.fake.SetPermission(ghRepo, "maintainer", "write")
	h.fake.SetCommitMessage(ghRepo, shaHead, "feat: widgets\n\nbody")
	id := h.post("pull_request", "pr-feat", prPayload("maintainer"))
	d, tr, _ := h.process(id)
	if runs := h.runs(id); d.Status != store.DeliveryProcessed || len(runs) != 2 {
		t.Fatalf("feat head: delivery %s (%s), runs %v, want pr-feat and pr-any (trace %+v)", d.Status, d.Error, runs, tr.Workflows)
	}
	h.fake.SetCommitMessage(ghRepo, shaHead, "wip [skip ci]")
	body := strings.Replace(string(prPayload("maintainer")), `"opened"`, `"synchronize"`, 1)
	id = h.post("pull_request", "pr-skip", []byte(body))
	d, tr, _ = h.process(id)
	if d.Status != store.DeliveryProcessed || len(h.runs(id)) != 0 {
		t.Fatalf("[skip ci] head: delivery %s (%s), runs %v, want none", d.Status, d.Error, h.runs(id))
	}
	for _, w := range tr.Workflows {
		if last := w.Checks[len(w.Checks)-1]; last.Check != "skip ci" || last.Value != "wip [skip ci]" {
			t.Errorf("[skip ci] head: workflow %s stopped by %+v, want the skip ci rule", w.Name, last)
		}
	}
	if n := h.fake.Calls("GET /repos/" + ghRepo + "/git/commits/" + shaHead); n != 2 {
		t.Errorf("commit message read %d times, want once per event", n)
	}
}

// TestForgeCommitMessageFromCommitsList: a push payload without
// head_commit (GitLab's) gives the message of the commits entry that is
// the pushed head, so `[skip ci]` needs no git fetch there.
func TestForgeCommitMessageFromCommitsList(t *testing.T) {
	var payload map[string]any
	_ = json.Unmarshal([]byte(`{"after":"bbb","checkout_sha":"bbb","commits":[
		{"id":"aaa","message":"feat: older"},{"id":"bbb","message":"docs: typo [skip ci]\n"}]}`), &payload)
	ev := &trigger.Event{Type: "push"}
	withForgeCommitMessage(ev, payload)
	if ev.CommitMessage != "docs: typo [skip ci]\n" {
		t.Fatalf("message %q, want the head commit's", ev.CommitMessage)
	}
	gh := &trigger.Event{Type: "push"}
	_ = json.Unmarshal([]byte(`{"after":"bbb","head_commit":{"id":"bbb","message":"fix: x"},"commits":[{"id":"bbb","message":"other"}]}`), &payload)
	withForgeCommitMessage(gh, payload)
	if gh.CommitMessage != "fix: x" {
		t.Fatalf("head_commit wins: %q", gh.CommitMessage)
	}
}
