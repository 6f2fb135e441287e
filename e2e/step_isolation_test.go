package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// probeWorkflow's step does what a hostile step on the bare-metal backend
// would try first. It walks its three nearest ancestors (its supervisor,
// the agent, then the orchestrator that spawned it), prints which environment variable names
// it can see in /proc/<pid>/environ and every credential-looking value it
// finds there; it reads the agent's open regular files through
// /proc/<agent>/fd (no /proc/<pid>/mem needed); and it looks for an
// admin-token file in every directory from its work directory up to /.
// Whatever it finds is printed reversed as well, so log masking cannot
// hide a leak from the test.
const probeWorkflow = `name: probe
on:
  push:
    branches: [main]
jobs:
  probe:
    steps:
      - name: steal
        run: |
          set +e +o pipefail
          echo "pwd=$(pwd)"
          echo "uid=$(id -u)"
          pid=$PPID
          depth=0
          while [ "$pid" -gt 1 ] && [ "$depth" -lt 3 ]; do
            comm=$(cat /proc/$pid/comm 2>/dev/null)
            if env_=$(tr '\0' '\n' < /proc/$pid/environ 2>/dev/null); then
              echo "ancestor $depth $comm environ readable"
              printf '%s\n' "$env_" | grep -a '^KICI_' | sed 's/=.*//; s/^/  name: /'
              printf '%s\n' "$env_" | grep -a -i 'token\|kat_\|kadm_' | sed 's/^/  value: /'
              printf '%s\n' "$env_" | grep -a -i 'token\|kat_\|kadm_' | rev | sed 's/^/  rev: /'
            else
              echo "ancestor $depth $comm environ unreadable"
            fi
            if [ "$comm" = kici-agent ]; then
              for f in /proc/$pid/fd/*; do
                if [ -f "$f" ]; then
                  echo "agent fd $f readable file"
                  grep -a -o 'kat_[A-Za-z0-9_-]*\|kadm_[A-Za-z0-9_-]*' "$f" 2>/dev/null | rev | sed 's/^/  fd rev: /'
                fi
              done
            fi
            pid=$(awk '{print $4}' /proc/$pid/stat 2>/dev/null || echo 1)
            depth=$((depth+1))
          done
          d=$(pwd)
          while [ "$d" != "/" ]; do
            if [ -e "$d/admin-token" ]; then
              echo "found $d/admin-token"
              cat "$d/admin-token"
              rev "$d/admin-token"
            fi
            d=$(dirname "$d")
          done
          echo "relative search done"
          for f in "$KICI_PROBE_DATA/admin-token" "$KICI_PROBE_DATA/kici.db" "$KICI_PROBE_DATA/secret.key" "/proc/$KICI_PROBE_ORCH/environ"; do
            if head -c 64 "$f" >/dev/null 2>&1; then echo "read ok: $f"; else echo "read refused: $f"; fi
            head -c 4096 "$f" 2>/dev/null | grep -a -o 'kadm_[A-Za-z0-9_-]*' | rev | sed 's/^/  data rev: /'
          done
          echo "data probe done"
`

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// probeTargets are the four reads a step must be refused.
func probeTargets(dataDir string, orchPID int) []string {
	return []string{dataDir + "/admin-token", dataDir + "/kici.db", dataDir + "/secret.key", "/proc/" + strconv.Itoa(orchPID) + "/environ"}
}

// runProbe starts an orchestrator whose data directory sits in a directory
// anyone may enter (so only the data directory's own protection counts),
// runs the probe step on its embedded default and returns the step's log.
func runProbe(t *testing.T, extraEnv ...string) (*orchestrator, string) {
	t.Helper()
	dataDir := filepath.Join(stepDir(t, 0o755), "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil { // as an operator might
		t.Fatal(err)
	}
	o := startOrchestratorAt(t, dataDir, freePort(t), extraEnv...)
	wf := strings.Replace(probeWorkflow, "          set +e +o pipefail\n",
		"          set +e +o pipefail\n          KICI_PROBE_DATA="+dataDir+"\n          KICI_PROBE_ORCH="+strconv.Itoa(o.cmd.Process.Pid)+"\n", 1)
	repo := repoWithWorkflow(t, wf)
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 2*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["probe"]
	log := o.logText(t, runID, job.JobID, 0)
	t.Logf("probe step log:\n%s", log)
	if r.Status != "success" || !strings.Contains(log, "data probe done") {
		t.Fatalf("probe run %s, or it did not run to the end: %+v", r.Status, r)
	}
	return o, log
}

// TestStepCannotReachAgentTokenOrAdminToken runs the probe on the embedded
// default (bare-metal agents on this host) and checks that a step can read
// neither the agent's token nor the owner admin token, nor anything of the
// orchestrator's data directory (admin-token, kici.db, secret.key), nor the
// orchestrator's /proc/<pid>/environ.
//
// As root (as in CI here) each job's steps run as a uid of the job's own in
// the job sandbox: the test checks every read is refused and, as a control,
// that the same probe with KICI_STEP_USER=root reads them all, so the test
// cannot pass because the probe is blind. As a normal user steps run as
// that user, which owns the data directory: nothing can keep them out, so
// the test checks that the non-dumpable agent's and orchestrator's environ
// are unreadable and that the agent says loudly that steps are not
// confined.
func TestStepCannotReachAgentTokenOrAdminToken(t *testing.T) {
	o, log := runProbe(t)
	// No agent token, in any form, anywhere the step could look.
	for _, leak := range []string{"kat_", reverse("kat_")} {
		if strings.Contains(log, leak) {
			t.Errorf("step log contains %q: an agent token leaked to the step", leak)
		}
	}
	// No owner admin token, and no admin-token file above the work dir.
	for _, leak := range []string{o.token, reverse(o.token), "kadm_", reverse("kadm_")} {
		if strings.Contains(log, leak) {
			t.Errorf("step log contains %q: the admin token leaked to the step", leak)
		}
	}
	if strings.Contains(log, "found ") {
		t.Errorf("the step found an admin-token file above its work directory")
	}

	// The work directory is outside the data directory, under the
	// per-user default, which others may enter but not list or write.
	var pwd string
	for _, l := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(l, "pwd="); ok {
			pwd = v
		}
	}
	defaultWork := filepath.Join(procTmp, "kici-work-"+strconv.Itoa(os.Getuid())) // the orchestrator's TMPDIR
	if pwd == "" || strings.HasPrefix(pwd, o.dataDir+"/") || !strings.HasPrefix(pwd, defaultWork+"/") {
		t.Errorf("step work dir %q: want it under %s and outside the data dir %s", pwd, defaultWork, o.dataDir)
	}
	if fi, err := os.Stat(defaultWork); err != nil || fi.Mode().Perm()&0o066 != 0 {
		t.Errorf("default work dir %s: %v %v, want no read or write for group and others", defaultWork, fi, err)
	}
	if fi, err := os.Stat(o.dataDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir %s: %v %v, want it made 0700", o.dataDir, fi, err)
	}

	if os.Geteuid() != 0 {
		for _, want := range []string{"kici-agent environ unreadable", "kici-orchestrat environ unreadable"} {
			if !strings.Contains(log, want) {
				t.Errorf("step log lacks %q: a same-user step read a non-dumpable process's environ", want)
			}
		}
		// Where user namespaces work, the spawned agent hides the data
		// directory (its summary says so); elsewhere it warns.
		if agentLogSays(o, "appear empty and read-only") {
			for _, f := range probeTargets(o.dataDir, o.cmd.Process.Pid) {
				if !strings.Contains(log, "read refused: "+f) {
					t.Errorf("the namespaced step could read %s", f)
				}
			}
		} else {
			waitAgentLog(t, o, "STEPS ARE NOT CONFINED")
		}
		return
	}
	if strings.Contains(log, "uid=0\n") {
		t.Errorf("as root the step still ran as root")
	}
	for _, f := range probeTargets(o.dataDir, o.cmd.Process.Pid) {
		if !strings.Contains(log, "read refused: "+f) {
			t.Errorf("the step could read %s", f)
		}
	}
	// In the job sandbox the agent and the orchestrator have no pid in the
	// step's PID namespace at all: the walk up ends at its supervisor, pid 1.
	for _, comm := range []string{"kici-agent", "kici-orchestrat"} {
		if strings.Contains(log, comm+" environ readable") {
			t.Errorf("the step read the environ of %s", comm)
		}
	}
	if strings.Contains(log, "ancestor 0 kici-step-super environ readable") {
		t.Errorf("the step read its (root) supervisor's environ")
	}

	// Control: steps kept as root read all four, so the probe is not blind.
	o2, log2 := runProbe(t, "KICI_STEP_USER=root")
	for _, f := range probeTargets(o2.dataDir, o2.cmd.Process.Pid) {
		if !strings.Contains(log2, "read ok: "+f) {
			t.Errorf("control (KICI_STEP_USER=root): the probe could not read %s, so its refusals prove nothing", f)
		}
	}
	waitAgentLog(t, o2, "STEPS ARE NOT CONFINED")
}

// waitAgentLog waits until some agent log of o contains want.
func waitAgentLog(t *testing.T, o *orchestrator, want string) {
	t.Helper()
	if wait.Until(10*time.Second, func() bool { return agentLogSays(o, want) }) {
		return
	}
	t.Errorf("no agent log says %q", want)
}

// agentLogSays reports whether a log of o's spawned agents contains want.
func agentLogSays(o *orchestrator, want string) bool {
	logs, _ := filepath.Glob(filepath.Join(o.dataDir, "agents", "*.log"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), want) {
			return true
		}
	}
	return false
}
