package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cacheWorkflow keeps a stamp in a cache under the job's (fresh) HOME: the
// step says whether it found one.
const cacheWorkflow = `name: cache
on:
  push:
    branches: ["**"]
jobs:
  build:
    cache:
      - key: deps-${{ kici.os }}-${{ hashFiles('deps.lock') }}
        paths: [~/.cache/e2e]
        restoreKeys: ['deps-${{ kici.os }}-']
    steps:
      - name: use
        run: |
          echo "home=$HOME"
          if [ -f ~/.cache/e2e/stamp ]; then echo "warm: $(cat ~/.cache/e2e/stamp)"; else echo "cold"; fi
          mkdir -p ~/.cache/e2e && echo "$KICI_SHA" > ~/.cache/e2e/stamp
`

// trigger commits nothing: it starts a run of the source at HEAD and waits
// for it.
func (o *orchestrator) triggerAndWait(t *testing.T, sourceID string) runView {
	t.Helper()
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	return o.waitRun(t, delivery, 3*time.Minute)
}

// cacheRepo is a repository with the workflow and a deps.lock key file.
func cacheRepo(t *testing.T, workflow string) string {
	t.Helper()
	dir := repoWithWorkflow(t, workflow)
	write(t, filepath.Join(dir, "deps.lock"), "v1\n")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "deps")
	return dir
}

// homeLine is the step's report of its HOME in cacheWorkflow.
var homeLine = regexp.MustCompile(`home=\S+`)

// Caches: the first run misses and saves, the second restores the exact key
// (and saves nothing), a changed key file falls back by restore key; every
// job has its own HOME, so only the cache carries the stamp.
func TestCacheMissHitRestoreKeys(t *testing.T) {
	repo := cacheRepo(t, cacheWorkflow)
	sha1 := git(t, repo, "rev-parse", "HEAD")
	o := startOrchestrator(t, "KICI_AGENT_JOB_HOME=true")
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "cached", "--quiet")

	logs := func(r runView) (setup, step string) {
		j := o.jobsOf(t, r.RunID)["build"]
		return o.logText(t, r.RunID, j.JobID, -1), o.logText(t, r.RunID, j.JobID, 0)
	}
	r1 := o.triggerAndWait(t, src)
	if r1.Status != "success" {
		t.Fatalf("run 1: %+v", r1)
	}
	setup, step := logs(r1)
	if !strings.Contains(step, "cold") || !strings.Contains(setup, "Cache miss for deps-") || !strings.Contains(setup, "saved") {
		t.Fatalf("run 1 should miss and save:\n%s\n%s", setup, step)
	}
	if !strings.Contains(step, "home=") || !strings.Contains(step, "kici-job-") {
		t.Errorf("the job HOME is not inside the job's work directory:\n%s", step)
	}
	home1 := homeLine.FindString(step)

	r2 := o.triggerAndWait(t, src)
	setup, step = logs(r2)
	// The next run of the job works at the same paths (its own agent, the
	// orchestrator's one work root): what the cache restored there still
	// names the right places.
	if home2 := homeLine.FindString(step); home1 == "" || home2 != home1 {
		t.Errorf("run 1 had %q and run 2 %q: a job's HOME should be at the same path run after run", home1, home2)
	}
	if r2.Status != "success" || !strings.Contains(step, "warm: "+sha1) || !strings.Contains(setup, "restored:") || strings.Contains(setup, "saved") {
		t.Fatalf("run 2 should restore the exact key and save nothing:\n%s\n%s", setup, step)
	}

	write(t, filepath.Join(repo, "deps.lock"), "v2\n")
	git(t, repo, "commit", "-qam", "bump deps")
	r3 := o.triggerAndWait(t, src)
	setup, step = logs(r3)
	if r3.Status != "success" || !strings.Contains(step, "warm: "+sha1) || !strings.Contains(setup, "restored from restore key match") || !strings.Contains(setup, "saved") {
		t.Fatalf("run 3 should restore by restore key and save its new key:\n%s\n%s", setup, step)
	}
}

const artifactWorkflow = `name: art
on:
  push:
    branches: ["**"]
jobs:
  build:
    artifacts:
      - name: bin
        paths: ["out/**", "!out/*.tmp"]
    run: |
      mkdir -p out/sub
      echo "payload $KICI_SHA" > out/sub/file.txt
      echo scratch > out/x.tmp
      head -c 300000 /dev/urandom > out/blob.bin
      sha256sum out/blob.bin | cut -d' ' -f1 > out/blob.sha
  test:
    needs: [build]
    download: [bin]
    run: |
      cat out/sub/file.txt
      test ! -e out/x.tmp && echo "excluded file absent"
      test "$(sha256sum out/blob.bin | cut -d' ' -f1)" = "$(cat out/blob.sha)" && echo "blob digest ok"
`

// Artifacts: a job's files reach a dependent job with their digest
// checked, the CLI lists and downloads them; an upload over
// artifactMaxBytes is refused mid-stream and nothing is stored.
func TestArtifactsRoundTripLimitAndCLI(t *testing.T) {
	repo := cacheRepo(t, artifactWorkflow)
	sha := git(t, repo, "rev-parse", "HEAD")
	o := startOrchestrator(t, "KICI_CLUSTER_SETTINGS_CACHE_TTL_MS=1")
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "art", "--quiet")

	r := o.triggerAndWait(t, src)
	jobs := o.jobsOf(t, r.RunID)
	if r.Status != "success" {
		t.Fatalf("run: %+v\n%s\n%s", r, o.logText(t, r.RunID, jobs["build"].JobID, -1), o.logText(t, r.RunID, jobs["test"].JobID, -1))
	}
	out := o.logText(t, r.RunID, jobs["test"].JobID, 0)
	if !strings.Contains(out, "payload "+sha) || !strings.Contains(out, "blob digest ok") || !strings.Contains(out, "excluded file absent") {
		t.Errorf("test job did not see the artifact:\n%s", out)
	}
	if setup := o.logText(t, r.RunID, jobs["test"].JobID, -1); !strings.Contains(setup, "Artifact bin downloaded (sha256 ") {
		t.Errorf("test job setup log:\n%s", setup)
	}
	list := o.admin(t, "runs", "artifacts", r.RunID)
	if !strings.Contains(list, "bin") || !strings.Contains(list, "build") {
		t.Errorf("runs artifacts:\n%s", list)
	}
	dir := t.TempDir()
	dl := o.admin(t, "runs", "artifacts", "download", r.RunID, "bin", "--dir", dir)
	if !strings.Contains(dl, "verified") {
		t.Errorf("download: %s", dl)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out/sub/file.txt")); err != nil || string(b) != "payload "+sha+"\n" {
		t.Errorf("downloaded file: %q %v", b, err)
	}
	archive := filepath.Join(t.TempDir(), "bin.tar.zst")
	o.admin(t, "runs", "artifacts", "download", r.RunID, "bin", "--archive", archive)
	if fi, err := os.Stat(archive); err != nil || fi.Size() < 300000 {
		t.Errorf("archive: %v %v", fi, err)
	}

	// 300 kB of random bytes do not compress below 64 KiB.
	o.admin(t, "cluster-settings", "set", "artifactMaxBytes", "65536")
	r2 := o.triggerAndWait(t, src)
	jobs = o.jobsOf(t, r2.RunID)
	if r2.Status != "failed" || jobs["build"].Status != "failed" || !strings.Contains(jobs["build"].ErrorMessage, "artifactMaxBytes") {
		t.Errorf("over-limit run: %+v, build %+v", r2, jobs["build"])
	}
	if list := o.admin(t, "runs", "artifacts", r2.RunID); !strings.Contains(list, "no artifacts") {
		t.Errorf("a refused upload left an artifact:\n%s", list)
	}
	blobs, _ := filepath.Glob(filepath.Join(o.dataDir, "blobs", "objects", "artifacts", "*", r2.RunID, "*"))
	if len(blobs) != 0 {
		t.Errorf("a refused upload left blob files: %v", blobs)
	}
	cmd := exec.Command(filepath.Join(binDir, "kici-admin"), "runs", "artifacts", "download", r2.RunID, "bin", "--dir", t.TempDir())
	cmd.Env = append(os.Environ(), o.env...)
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "404") {
		t.Errorf("download of a refused artifact: %v %s", err, b)
	}
}
