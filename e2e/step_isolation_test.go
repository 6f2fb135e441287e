package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// probeWorkflow's step does what a hostile step on the bare-metal backend
// would try first. It walks its two nearest ancestors (the agent, then the
// orchestrator that spawned it), prints which environment variable names
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
          while [ "$pid" -gt 1 ] && [ "$depth" -lt 2 ]; do
            comm=$(cat /proc/$pid/comm 2>/dev/null)
            if env_=$(tr '\0' '\n' < /proc/$pid/environ 2>/dev/null); then
              echo "ancestor $depth $comm environ readable"
              printf '%s\n' "$env_" | grep -a '^KICI_' | sed 's/=.*//; s/^/  name: /'
              printf '%s\n' "$env_" | grep -a -i 'token\|kat_\|kadm_' | sed 's/^/  value: /'
              printf '%s\n' "$env_" | grep -a -i 'token\|kat_\|kadm_' | rev | sed 's/^/  rev: /'
            else
              echo "ancestor $depth $comm environ unreadable"
            fi
            if [ "$depth" -eq 0 ]; then
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
`

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// TestStepCannotReachAgentTokenOrAdminToken runs the probe on the embedded
// default (bare-metal agents on this host) and checks that neither the
// agent's token nor the owner admin token shows up in the step's log.
//
// As root (as in CI here) the step can read every /proc entry, so the
// test checks what the fixes guarantee for root too: the agent's
// environment is readable but holds no KICI_AGENT_TOKEN (the token came
// through descriptor 3, read and closed), and the work directory is not
// under the data directory, so no admin-token is found above it. As a
// non-root user it also checks that the agent's and the orchestrator's
// environ are unreadable (PR_SET_DUMPABLE 0); internal/hardening tests
// that as user nobody even when run as root.
func TestStepCannotReachAgentTokenOrAdminToken(t *testing.T) {
	repo := repoWithWorkflow(t, probeWorkflow)
	o := startOrchestrator(t)
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 2*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["probe"]
	log := o.logText(t, runID, job.JobID, 0)
	t.Logf("probe step log:\n%s", log)
	if r.Status != "success" {
		t.Fatalf("probe run %s: %+v", r.Status, r)
	}

	if !strings.Contains(log, "relative search done") {
		t.Fatalf("the probe did not run to the end")
	}
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
	// per-user default, which is private.
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
	if fi, err := os.Stat(defaultWork); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("default work dir %s: %v %v, want mode 0700", defaultWork, fi, err)
	}

	if os.Geteuid() == 0 {
		// Root reads everything; what must hold is that the agent's
		// environment no longer carries the token at all.
		if !strings.Contains(log, "ancestor 0 kici-agent environ readable") || !strings.Contains(log, "name: KICI_AGENT_TOKEN_FD") {
			t.Errorf("as root the step should read the agent's environ and see KICI_AGENT_TOKEN_FD (else this check proves nothing)")
		}
		if strings.Contains(log, "name: KICI_AGENT_TOKEN\n") {
			t.Errorf("the agent's environment holds KICI_AGENT_TOKEN")
		}
	} else {
		for _, want := range []string{"ancestor 0 kici-agent environ unreadable", "ancestor 1 kici-orchestrat environ unreadable"} {
			if !strings.Contains(log, want) {
				t.Errorf("step log lacks %q: a same-user step read a non-dumpable process's environ", want)
			}
		}
	}
}
