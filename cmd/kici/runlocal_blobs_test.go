package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// blobsWorkflow uploads an attested artifact in one job and downloads it
// in the job that needs it, and caches a directory the build creates
// (.deps, gitignored) and one under the job's HOME.
const blobsWorkflow = `name: blobs
on:
  push: {}
jobs:
  build:
    cache:
      - key: deps-${{ hashFiles('deps.lock') }}
        paths: [.deps, ~/.cache/tool]
    artifacts:
      - name: bin
        paths: ["out/**"]
        attest: true
    run: |
      if [ -f .deps/stamp ]; then echo "deps warm: $(cat .deps/stamp) $(cat ~/.cache/tool/stamp)"; else echo "deps cold"; fi
      mkdir -p .deps ~/.cache/tool out && echo fetched > .deps/stamp && echo tooled > ~/.cache/tool/stamp
      echo "built $(cat deps.lock)" > out/app
  test:
    needs: [build]
    download: [bin]
    run: cat out/app
`

// `kici run local` serves caches and artifacts like the orchestrator: the
// artifact of build is attested (signed locally) and reaches test, the
// first run saves the caches and the second restores them (the state lives in the git directory, so the
// working tree stays clean).
func TestRunLocalArtifactsAndCaches(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"blobs.yaml": blobsWorkflow})
	for name, body := range map[string]string{".gitignore": ".deps/\nout/\n", "deps.lock": "v1\n"} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "deps")

	out, stderr, code := runKici(t, bin, repo, "run", "local", "push", "--branch", "main")
	if code != 0 {
		t.Fatalf("run 1: %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"deps cold", "Cache miss for deps-", "saved: 2 files", "Artifact bin uploaded", "Artifact bin attested: ", "Artifact bin downloaded", "[test] built v1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("run 1 output lacks %q:\n%s", want, out)
		}
	}
	out, stderr, code = runKici(t, bin, repo, "run", "local", "push", "--branch", "main")
	if code != 0 || !strings.Contains(out, "deps warm: fetched tooled") || !strings.Contains(out, "restored: 2 files") {
		t.Fatalf("run 2 should restore both cached directories: %d\n%s\n%s", code, out, stderr)
	}
	if st, _ := exec.Command("git", "-C", repo, "status", "--porcelain").Output(); len(st) != 0 {
		t.Errorf("the working tree changed: %q", st)
	}
}
