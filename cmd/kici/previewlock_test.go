package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `kici preview --lock FILE` inside a repository whose own workflows
// drifted previews FILE as it is; `kici run local --lock FILE` runs the
// repository's files, so it checks FILE against them and names FILE (not
// .kici/kici.lock.json) when they differ.
func TestPreviewExplicitLockInsideDriftedRepository(t *testing.T) {
	bin := sharedKici(t)
	// The lock to preview, compiled in another repository.
	other := newRepo(t, bin, map[string]string{"deploy.yaml": "name: deploy\non: push\njobs:\n  ship: {run: echo ship}\n"})
	lock := filepath.Join(t.TempDir(), "deploy.lock.json")
	data, err := os.ReadFile(filepath.Join(other, ".kici", "kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The current repository: its workflow edited without recompiling.
	repo := newRepo(t, bin, map[string]string{"ci.yaml": "on: push\njobs:\n  a: {run: echo old}\n"})
	if err := os.WriteFile(filepath.Join(repo, ".kici", "workflows", "ci.yaml"), []byte("on: push\njobs:\n  a: {run: echo new-step}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out, stderr, code := runKici(t, bin, repo, "preview", "push", "--branch", "main", "--lock", lock)
	if code != 0 || !strings.Contains(out, "deploy") || strings.Contains(out+stderr, "drift") {
		t.Fatalf("preview --lock FILE: exit %d\n%s\n%s", code, out, stderr)
	}
	_, stderr, code = runKici(t, bin, repo, "run", "local", "push", "--branch", "main", "--lock", lock)
	if code != 1 || !strings.Contains(stderr, "is not in the lock file "+lock) || !strings.Contains(stderr, "named by the lock file "+lock) {
		t.Fatalf("run local --lock FILE: exit %d, want the problems to name %s:\n%s", code, lock, stderr)
	}
	if strings.Contains(stderr, ".kici/kici.lock.json") {
		t.Errorf("run local --lock FILE names the repository's lock:\n%s", stderr)
	}
}
