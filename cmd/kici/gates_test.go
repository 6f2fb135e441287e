package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviewTriggerGates: `kici preview` evaluates the gates with HEAD's
// message (or --message) and the working tree's files, as the
// orchestrator does with the pushed commit's.
func TestPreviewTriggerGates(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"deploy.yaml": `name: deploy
on:
  push:
    commitMessage: {matches: '^feat'}
    requires:
      - file: deploy.json
        match: {"$.enabled": true}
jobs:
  d:
    run: "true"
`})
	preview := func(args ...string) (bool, string) {
		t.Helper()
		out, stderr, code := runKici(t, bin, repo, append([]string{"preview", "push", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("preview: %d %s", code, stderr)
		}
		var got PreviewOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		d := got.Workflows[0]
		last := d.Checks[len(d.Checks)-1]
		return d.Matched, last.Check + ": " + last.Reason
	}
	if ok, why := preview(); ok || why != "commit message matches: message does not match" {
		t.Errorf("HEAD's message %q: matched=%v %s", "init", ok, why)
	}
	if ok, why := preview("--message", "feat: x"); ok || !strings.Contains(why, "no such file") {
		t.Errorf("no deploy.json: matched=%v %s", ok, why)
	}
	if err := os.WriteFile(filepath.Join(repo, "deploy.json"), []byte(`{"enabled": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, why := preview("--message", "feat: x"); !ok {
		t.Errorf("feat with deploy.json: not matched (%s)", why)
	}
	if ok, why := preview("--message", "feat: x [skip ci]"); ok || why != "skip ci: commit message carries [skip ci]" {
		t.Errorf("[skip ci]: matched=%v %s", ok, why)
	}
}
