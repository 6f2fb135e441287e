package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gitUseWorkflow's step uses its checkout the way builds do (history,
// status, a commit) and tries to append to every pack file of it.
const gitUseWorkflow = `name: gituse
on:
  push:
    branches: [main]
jobs:
  use:
    steps:
      - name: git
        run: |
          echo "uid=$(id -u)"
          git log --format='log %H' -1
          test -z "$(git status --porcelain)" && echo "status clean"
          echo more > more.txt && git add more.txt
          git -c user.email=ci@example.com -c user.name=ci commit -qm more && echo "commit made"
          for p in .git/objects/pack/*.pack; do
            if echo junk 2>/dev/null >> "$p"; then echo "pack writable: $p"; fi
          done
          echo "probe done"
`

// TestCheckoutFromMirrorUsableByStep: two jobs of one repository check
// out through the host mirror; each step can read its history and commit
// to it. As root (as in CI) steps run as the step user and the checkout
// links the mirror's packs: the step cannot write to them, and the
// mirror's files stay root's, read-only.
func TestCheckoutFromMirrorUsableByStep(t *testing.T) {
	workDir := filepath.Join(stepDir(t, 0o755), "work")
	o := startOrchestrator(t, "KICI_WORK_DIR="+workDir)
	repo := repoWithWorkflow(t, gitUseWorkflow)
	out, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.TrimSpace(string(out))
	source := ""
	for i := 0; i < 2; i++ { // the first fills the mirror, the second finds it warm
		var delivery string
		source, delivery = o.push(t, repo, source)
		runID := o.runOf(t, delivery)
		r := o.waitRunStatus(t, runID, 2*time.Minute, "success", "failed", "cancelled")
		job := o.jobsOf(t, runID)["use"]
		log := o.logText(t, runID, job.JobID, 0)
		if r.Status != "success" {
			t.Fatalf("run %d ended %s: %s\n%s", i, r.Status, r.FailureReason, log)
		}
		for _, want := range []string{"log " + sha, "status clean", "commit made", "probe done"} {
			if !strings.Contains(log, want) {
				t.Errorf("run %d: step log lacks %q:\n%s", i, want, log)
			}
		}
		if strings.Contains(log, "pack writable") {
			t.Errorf("run %d: the step could write to a pack of its checkout:\n%s", i, log)
		}
		if os.Geteuid() == 0 && strings.Contains(log, "uid=0\n") {
			t.Errorf("run %d: steps ran as root; want the step user", i)
		}
	}
	packs, _ := filepath.Glob(filepath.Join(workDir, "kici-mirrors", "*.git", "objects", "pack", "pack-*"))
	if len(packs) == 0 {
		t.Fatalf("no pack in the host mirror under %s: fetches should keep packs", workDir)
	}
	for _, p := range packs {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("mirror file %s: uid %d mode %v, want the agent's user (%d) and read-only", p, st.Uid, fi.Mode().Perm(), os.Geteuid())
		}
	}
}
