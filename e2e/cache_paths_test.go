package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// createdDirWorkflow caches a directory the step creates and the
// repository ignores (.deps, the node_modules/vendor/.venv/target pattern).
const createdDirWorkflow = `name: deps
on:
  push:
    branches: ["**"]
jobs:
  build:
    cache:
      - key: deps-${{ hashFiles('deps.lock') }}
        paths: [.deps]
    steps:
      - name: install
        run: |
          if [ -f .deps/installed ]; then echo "deps restored: $(cat .deps/installed) owned by me: $([ "$(stat -c %u .deps/installed)" = "$(id -u)" ] && echo yes || echo no)"; else echo "deps cold"; fi
          mkdir -p .deps && echo "$KICI_SHA" > .deps/installed && echo "uid=$(id -u)"
`

// A cache of a directory a step creates (gitignored, absent from the
// checkout) is saved after run 1 and restored before the steps of run 2;
// the setup log names the rendered key, not its template.
func TestCacheOfCreatedDirectorySavedAndRestored(t *testing.T) {
	repo := cacheRepo(t, createdDirWorkflow)
	write(t, filepath.Join(repo, ".gitignore"), ".deps/\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "ignore deps")
	sha1 := git(t, repo, "rev-parse", "HEAD")
	o := startOrchestrator(t)
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "deps", "--quiet")
	logs := func(r runView) (setup, step string) {
		j := o.jobsOf(t, r.RunID)["build"]
		return o.logText(t, r.RunID, j.JobID, -1), o.logText(t, r.RunID, j.JobID, 0)
	}
	r1 := o.triggerAndWait(t, src)
	setup, step := logs(r1)
	if r1.Status != "success" || !strings.Contains(step, "deps cold") || !strings.Contains(setup, "Cache miss for deps-") || !strings.Contains(setup, "saved: 1 files") {
		t.Fatalf("run 1 should miss and save .deps:\n%s\n%s", setup, step)
	}
	if strings.Contains(setup, "${{") || strings.Contains(setup, "does not exist") {
		t.Errorf("setup log shows the key template or refuses the missing directory:\n%s", setup)
	}
	// Each job runs as a uid of its own: what run 2 restores belongs to
	// run 2's uid, not to run 1's nor to root.
	r2 := o.triggerAndWait(t, src)
	setup, step = logs(r2)
	if r2.Status != "success" || !strings.Contains(step, "deps restored: "+sha1+" owned by me: yes") || !strings.Contains(setup, "restored: 1 files") {
		t.Fatalf("run 2 should restore .deps, owned by its own step uid:\n%s\n%s", setup, step)
	}
}

// The cache-path attack with a hand-written lock (the compiler refuses
// these paths, TestCompileCachePathsOutsideTheJobRefused): one cache names
// the orchestrator's data directory (admin token, secret key, database),
// another restores an existing key into a root-owned 0700 directory. The
// agent refuses both before touching them: nothing is saved from the data
// directory and nothing is written into the root-owned one.
func TestCacheAttackAbsolutePathsRefusedAtRestore(t *testing.T) {
	const wf = `name: attack
on:
  push:
    branches: ["**"]
jobs:
  build:
    cache:
      - key: plant
        paths: [.plant]
      - key: steal
        paths: [.steal]
    run: mkdir -p .plant && echo '* * * * * root touch /tmp/pwned' > .plant/evil
`
	repo := cacheRepo(t, wf)
	write(t, filepath.Join(repo, ".plant", "README"), "planted by run 1\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "plant dir")
	// Outside /tmp: a cache path under /tmp names the job's private
	// temporary directory, never the host's /tmp.
	host := hostDir(t)
	rootOwned := filepath.Join(host, "cron.d")
	dataDir := filepath.Join(host, "data")
	for _, d := range []string{rootOwned, dataDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dataDir, 0o711); err != nil { // the agents' work directory is inside
		t.Fatal(err)
	}
	o := startOrchestratorAt(t, dataDir, freePort(t))
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "attack", "--quiet")
	build := func(r runView) string { return o.logText(t, r.RunID, o.jobsOf(t, r.RunID)["build"].JobID, -1) }
	r1 := o.triggerAndWait(t, src)
	if setup := build(r1); r1.Status != "success" || !strings.Contains(setup, "Cache plant saved") {
		t.Fatalf("run 1 should save the planted cache:\n%s", setup)
	}

	lockPath := filepath.Join(repo, ".kici", "kici.lock.json")
	lock, err := os.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	hand := strings.Replace(strings.Replace(string(lock), `".plant"`, `"`+rootOwned+`"`, 1), `".steal"`, `"`+o.dataDir+`"`, 1)
	if hand == string(lock) {
		t.Fatal("lock paths not found")
	}
	write(t, lockPath, hand)
	git(t, repo, "commit", "-qam", "hand-written lock")
	r2 := o.triggerAtHead(t, src, repo)
	setup := build(r2)
	for _, p := range []string{rootOwned, o.dataDir} {
		if !strings.Contains(setup, `cache path "`+p+`" is outside the job's workspace, HOME and /tmp`) {
			t.Errorf("run 2 does not refuse %s:\n%s", p, setup)
		}
	}
	if ents, _ := os.ReadDir(rootOwned); len(ents) != 0 {
		t.Errorf("the restore wrote into the root-owned directory: %v", ents)
	}

	// Nothing was saved from the data directory: a job that may restore
	// "steal" into its workspace misses.
	write(t, lockPath, strings.Replace(string(lock), `"run": "mkdir`, `"run": "ls -A .steal || true; mkdir`, 1))
	git(t, repo, "commit", "-qam", "restore steal")
	r3 := o.triggerAtHead(t, src, repo)
	if setup := build(r3); !strings.Contains(setup, "Cache miss for steal") {
		t.Errorf("run 3 restored a cache of the data directory:\n%s", setup)
	}
}

// triggerAtHead starts a run at the repository's HEAD commit by its SHA
// (the lock is read at that commit, not from the branch's cached lock) and
// waits for it.
func (o *orchestrator) triggerAtHead(t *testing.T, sourceID, repo string) runView {
	t.Helper()
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--ref", "main", "--sha", git(t, repo, "rev-parse", "HEAD"), "--quiet")
	return o.waitRun(t, delivery, 3*time.Minute)
}

// hostDir is a fresh directory outside /tmp (under /var/tmp), searchable
// by the step user, removed at cleanup.
func hostDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "kici-e2e-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	return d
}
