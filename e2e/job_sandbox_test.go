package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// The job sandbox on the embedded default (bare-metal agents spawned by a
// root orchestrator): each job runs as a uid of its own, in its own PID,
// mount and IPC namespaces, with a HOME of its own (docs/trust-model.md).

// victimWorkflow holds a secret of its org in a live process's environment
// and leaves files in its workspace, HOME and /tmp, then waits to be
// cancelled.
func victimWorkflow(ready string) string {
	return `name: victim
on:
  push:
    branches: [main]
jobs:
  victim:
    contexts: [vault]
    steps:
      - name: hold
        secrets:
          BSEC: vault:bsec
        run: |
          echo "victim pwd=$(pwd) home=$HOME"
          echo victim-planted > "$HOME/victim-home-file"
          echo victim-planted > victim-ws-file
          echo victim-planted > /tmp/victim-tmp-file || true
          echo victim-planted > "$TMPDIR/victim-tmpdir-file"
          ` + ready + `
          exec sleep 300
`
}

// attackerWorkflow is what a hostile step of another org tries: find the
// other job's secret in every /proc/<pid>/environ, its workspace through
// every /proc/<pid>/cwd, by path below the work root and at the exact
// paths the victim reported (victimWS, victimHome: job directories are
// named for their job, so a path can be guessed), its HOME and /tmp files,
// and list every process it can see. Whatever it steals is printed
// reversed as well, so masking cannot hide a leak from the test. As a
// control it reads its own secret from its own environ.
func attackerWorkflow(work, victimWS, victimHome string) string {
	return `name: attacker
on:
  push:
    branches: [main]
jobs:
  attacker:
    contexts: [release]
    steps:
      - name: steal
        secrets:
          ASEC: release:asec
        run: |
          set +e +o pipefail
          echo "self pwd=$(pwd) uid=$(id -u)"
          cat /proc/self/environ | tr '\0' '\n' | grep -q '^ASEC=' && echo "own environ readable"
          for p in /proc/[0-9]*; do
            echo "proc ${p#/proc/} $(cat $p/comm 2>/dev/null) cwd=$(readlink $p/cwd 2>/dev/null)"
            cat $p/environ 2>/dev/null | tr '\0' '\n' | grep -a '^BSEC=' | rev | sed 's/^/stolen rev: /'
            cat $p/environ 2>/dev/null | tr '\0' '\n' | grep -a '^BSEC=' | sed 's/^/stolen: /'
            ls $p/cwd/ 2>/dev/null | grep victim | sed 's/^/via cwd: /'
          done
          for d in ` + work + ` /tmp /var/tmp /dev/shm "$(dirname "$(dirname "$HOME")")"; do
            find "$d" -name 'victim-*' 2>/dev/null | sed 's/^/found file: /'
          done
          ls -a ` + work + ` 2>&1 | sed 's/^/work root: /'
          cat ` + work + `/*/src/victim-ws-file ` + work + `/*/home/victim-home-file ` + work + `/.home-*/victim-home-file 2>/dev/null | sed 's/^/read: /'
          cat '` + victimWS + `/victim-ws-file' '` + victimHome + `/victim-home-file' 2>/dev/null | sed 's/^/read: /'
          ls -a '` + victimWS + `' '` + victimHome + `' 2>/dev/null | grep victim | sed 's/^/found file: /'
          echo "probe done"
`
}

// TestConcurrentJobCannotReachAnotherJob runs two jobs of different orgs at
// once on the embedded default. The victim (org globex) holds its context
// secret in a live process and leaves files in its workspace, HOME, /tmp
// and TMPDIR; the attacker (org acme) looks for them through /proc and by
// path while the victim runs. It must find none of it and see no process
// but its own, although it can read its own environ (so the probe is not
// blind). Before per-job sandboxes both jobs ran as the same step user with
// the host's /proc: the attacker printed the victim's secret.
func TestConcurrentJobCannotReachAnotherJob(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the per-job uid and namespaces need a root agent (as in CI here); a non-root agent is covered by cmd/kici-agent's namespace test")
	}
	work := filepath.Join(stepDir(t, 0o711), "work")
	marks := marksDir(t)
	o := startOrchestrator(t, "KICI_WORK_DIR="+work)
	log, self := crossJobAttack(t, o, work, "touch "+marks+"/ready", func() bool {
		_, err := os.Stat(filepath.Join(marks, "ready"))
		return err == nil
	}, nil)
	for _, l := range strings.Split(log, "\n") {
		if d, ok := strings.CutPrefix(l, "work root: "); ok && d != "." && d != ".." && !strings.HasPrefix(self, filepath.Join(work, d)+"/") {
			t.Errorf("the attacker sees %s in the work root, not its own work directory", d)
		}
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "proc" {
			continue
		}
		if f[2] == "kici-agent" || f[2] == "kici-orchestrat" {
			t.Errorf("the attacker sees a host process: %s", l)
		}
		if cwd := strings.TrimPrefix(f[len(f)-1], "cwd="); cwd != "" && !strings.HasPrefix(cwd, self) && cwd != "/" {
			t.Errorf("the attacker sees a process working outside its own workspace %s: %s", self, l)
		}
	}
}

// crossJobAttack sets up org globex's context secret and org acme's, starts
// the victim job (which runs ready once it holds its secret; held reports
// it), runs the attacker job while the victim runs, checks that the
// attacker found nothing of the victim and returns the attacker's log and
// workspace. adapt, when set, rewrites both workflows (another backend).
func crossJobAttack(t *testing.T, o *orchestrator, work, ready string, held func() bool, adapt func(string) string) (log, self string) {
	t.Helper()
	if adapt == nil {
		adapt = func(s string) string { return s }
	}
	bsec := "bsec-" + randomHex(t)
	asec := "asec-" + randomHex(t)
	o.admin(t, "context", "create", "--org", "globex", "--name", "vault")
	o.admin(t, "context", "bind", "--org", "globex", "--env", "vault", "--scope", "vault")
	o.adminIn(t, bsec+"\n", "secret", "set", "--org", "globex", "vault", "bsec", "--from-stdin")
	o.admin(t, "context", "create", "--org", "acme", "--name", "release")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "release", "--scope", "release")
	o.adminIn(t, asec+"\n", "secret", "set", "--org", "acme", "release", "asec", "--from-stdin")

	victimRepo := repoWithWorkflow(t, adapt(victimWorkflow(ready)))
	victimSrc := o.admin(t, "source", "add", "local", "--org", "globex", "--path", victimRepo, "--name", "victim", "--quiet")
	victimRun := o.runOf(t, o.admin(t, "source", "trigger-local", victimSrc, "--quiet"))
	wait.For(t, 2*time.Minute, "the victim job to hold its secret", func() bool {
		if held() {
			return true
		}
		if v := o.waitRunStatus(t, victimRun, time.Second, "queued", "pending", "running", "success", "failed", "cancelled"); v.Status != "running" && v.Status != "queued" && v.Status != "pending" {
			t.Fatalf("victim run %s before it held its secret: %s", v.Status, o.logText(t, victimRun, o.jobsOf(t, victimRun)["victim"].JobID, 0))
		}
		return false
	})
	defer func() {
		o.admin(t, "runs", "cancel", victimRun)
		o.waitRunStatus(t, victimRun, time.Minute, "cancelled", "failed", "success")
	}()

	var victimWS, victimHome string
	wait.For(t, 30*time.Second, "the victim to report its paths", func() bool {
		m := victimPaths.FindStringSubmatch(o.logText(t, victimRun, o.jobsOf(t, victimRun)["victim"].JobID, 0))
		if m != nil {
			victimWS, victimHome = m[1], m[2]
		}
		return m != nil
	})
	_, delivery := o.push(t, repoWithWorkflow(t, adapt(attackerWorkflow(work, victimWS, victimHome))), "")
	attackRun := o.runOf(t, delivery)
	r := o.waitRunStatus(t, attackRun, 2*time.Minute, "success", "failed", "cancelled")
	log = o.logText(t, attackRun, o.jobsOf(t, attackRun)["attacker"].JobID, 0)
	t.Logf("attacker step log:\n%s", log)
	if r.Status != "success" || !strings.Contains(log, "probe done") || !strings.Contains(log, "own environ readable") {
		t.Fatalf("attacker run %s, or its probe did not run to the end or could not read its own environ", r.Status)
	}
	if v := o.waitRunStatus(t, victimRun, 5*time.Second, "running"); v.Status != "running" {
		t.Fatalf("victim run %s: the attack did not run while the victim held its secret", v.Status)
	}
	for _, leak := range []string{bsec, reverse(bsec), "stolen", "via cwd:", "found file:", "read: ", "victim-planted"} {
		if strings.Contains(log, leak) {
			t.Errorf("the attacker's log contains %q: it reached the other job", leak)
		}
	}
	for _, l := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(l, "self pwd="); ok {
			self, _, _ = strings.Cut(v, " ")
		}
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "proc" && f[2] == "sleep" {
			t.Errorf("the attacker sees the other job's process: %s", l)
		}
	}
	return log, self
}

// victimPaths reads the victim's workspace and HOME from its step log.
var victimPaths = regexp.MustCompile(`victim pwd=(\S+) home=(\S+)`)

// randomHex is 16 random bytes in hex.
func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// homeWorkflow has two jobs, one after the other: each checks that its
// HOME is empty, leaves a file, a cache directory and its HOME's path
// (for the test) behind.
func homeWorkflow(marks string) string {
	step := `
      - run: |
          echo "home=$HOME uid=$(id -u)"
          left=$(ls -A "$HOME")
          if [ -n "$left" ]; then echo "HOME not empty: $left"; exit 1; fi
          echo "left by $KICI_JOB_NAME" > "$HOME/leftover"
          mkdir -p "$HOME/.cache/go-build" && echo planted > "$HOME/.cache/go-build/entry"
          echo "$HOME" > ` + marks + `/home-$KICI_JOB_NAME
`
	return `name: homes
on:
  push:
    branches: [main]
jobs:
  first:
    steps:` + step + `  second:
    needs: [first]
    steps:` + step
}

// TestEachJobGetsAFreshHomeRemovedAfter: on the embedded default each job
// starts with an empty HOME of its own — nothing the job before left in
// it (a planted build-cache entry included) is there — and the HOME is
// gone from the host once the job ended. Before, every job of the host
// shared the step user's HOME.
func TestEachJobGetsAFreshHomeRemovedAfter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("steps run as another user than the agent's only under a root agent (as in CI here)")
	}
	marks := marksDir(t)
	o := startOrchestrator(t)
	_, delivery := o.push(t, repoWithWorkflow(t, homeWorkflow(marks)), "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 2*time.Minute, "success", "failed", "cancelled")
	jobs := o.jobsOf(t, runID)
	if r.Status != "success" {
		t.Fatalf("run %s: %s\nsecond job's log:\n%s", r.Status, r.FailureReason, o.logText(t, runID, jobs["second"].JobID, 0))
	}
	homes := map[string]bool{}
	for _, name := range []string{"first", "second"} {
		b, err := os.ReadFile(filepath.Join(marks, "home-"+name))
		if err != nil {
			t.Fatalf("job %s did not say its HOME: %v", name, err)
		}
		home := strings.TrimSpace(string(b))
		homes[home] = true
		if _, err := os.Lstat(home); !os.IsNotExist(err) {
			t.Errorf("job %s's HOME %s is still there after the job: %v", name, home, err)
		}
	}
	if len(homes) != 2 {
		t.Errorf("both jobs had the HOME %v", homes)
	}
}

// TestMatrixOnFreshWorkDirAllLegsStart: eight legs of a matrix start at
// once, each on its own freshly spawned agent, on a work directory that
// does not exist yet. Every leg must run: setting up a job's identity and
// HOME must not race with the other agents doing the same (before, a leg
// could fail in its first milliseconds with "step user home: … is not a
// directory owned by uid 999").
func TestMatrixOnFreshWorkDirAllLegsStart(t *testing.T) {
	work := filepath.Join(stepDir(t, 0o711), "fresh-work")
	o := startOrchestrator(t, "KICI_WORK_DIR="+work, "KICI_MAX_AGENTS=8")
	_, delivery := o.push(t, repoWithWorkflow(t, `name: legs
on:
  push:
    branches: [main]
jobs:
  leg:
    matrix:
      n: ["1", "2", "3", "4", "5", "6", "7", "8"]
    steps:
      - run: |
          test -z "$(ls -A "$HOME")"
          echo "leg $KICI_MATRIX_N" > "$HOME/mine" && cat "$HOME/mine"
`), "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	if r.Status != "success" {
		for name, j := range o.jobsOf(t, runID) {
			if j.Status != "success" {
				t.Errorf("leg %s %s: %s", name, j.Status, j.ErrorMessage)
			}
		}
		t.Fatalf("run %s: %s", r.Status, r.FailureReason)
	}
	if n := len(o.jobsOf(t, runID)); n != 8 {
		t.Errorf("%d legs, want 8", n)
	}
}

// TestConcurrentJobCannotReachAnotherJobOnContainerScaler runs the same
// attack on the container backend: each job gets an agent container of its
// own (one job per agent, then the container is removed), so the other
// job's processes, workspace, HOME and /tmp are in another container.
func TestConcurrentJobCannotReachAnotherJobOnContainerScaler(t *testing.T) {
	_, name := containerScalerName(t, "e2e-sbx")
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+containerScalerConfig(t, name, ""), "KICI_HOST=172.30.0.1")
	inContainer := func(wf string) string {
		wf = strings.Replace(wf, "    contexts:", "    runsOn: ctr\n    checkout: false\n    contexts:", 1)
		return strings.Replace(wf, "        run: |", "        shell: sh\n        run: |", 1)
	}
	var victimRun string
	crossJobAttack(t, o, "/tmp", "echo holding-secret", func() bool {
		if victimRun == "" {
			var list struct {
				Runs []runView `json:"runs"`
			}
			o.get(t, "/api/v1/admin/runs", &list)
			for _, r := range list.Runs {
				if r.Status == "running" {
					victimRun = r.RunID
				}
			}
			if victimRun == "" {
				return false
			}
		}
		job := o.jobsOf(t, victimRun)["victim"]
		return job.JobID != "" && strings.Contains(o.logText(t, victimRun, job.JobID, 0), "holding-secret")
	}, inContainer)
}
