package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// nobody is the unprivileged identity the agent runs as in these tests.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// ownedDir is a fresh directory under the system temp dir owned by nobody.
func ownedDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	d := stepDir(t, mode)
	if err := os.Chown(d, int(nobody.Uid), int(nobody.Gid)); err != nil {
		t.Fatal(err)
	}
	return d
}

// runAsNobodyAgent starts a kici-agent as nobody with extra env, runs one
// (untrusted when untrusted) job whose step tries to read each of targets,
// and returns the step's log and the agent's own output.
func runAsNobodyAgent(t *testing.T, extra []string, untrusted bool, prelude string, targets []string) (stepLog, agentLog string) {
	t.Helper()
	srv := agenttest.NewServer(t, agenttest.Options{})
	work := ownedDir(t, 0o700)
	env := append([]string{"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_WORK_DIR=" + work, "HOME=" + work}, extra...)
	p := startBinAs(t, nobody, env)
	srv.WaitRegistrations(t, 1, 20*time.Second)
	var script strings.Builder
	script.WriteString(prelude)
	for _, f := range targets {
		script.WriteString("if cat " + f + " >/dev/null 2>&1; then echo \"read ok: " + f + "\"; else echo \"read refused: " + f + "\"; fi\n")
	}
	srv.Dispatch(t, &protocol.JobDispatch{RunID: "r1", JobID: "j1", Untrusted: untrusted}, lockfile.Job{
		Name: "j", Checkout: boolPtr(false), Steps: []lockfile.Step{{Name: "probe", Run: script.String()}},
	})
	st, _ := srv.WaitJobTerminal(t, "j1", 60*time.Second)
	if st.State != "success" {
		t.Fatalf("job ended %s; step log:\n%s\nagent output:\n%s", st.State, srv.LogText("j1", 0), p.stderr.String())
	}
	return srv.LogText("j1", 0), p.stderr.String()
}

// TestNonRootAgentHidesDataDirFromSteps: an agent running as an ordinary
// user (nobody) next to an orchestrator of the same user: with
// KICI_AGENT_HIDE_PATHS naming the data directory, a step (of an untrusted
// job, now allowed) can read neither admin-token, kici.db nor secret.key
// nor the orchestrator's /proc/<pid>/environ. The control without the
// setting reads all four, so the probe is not blind.
func TestNonRootAgentHidesDataDirFromSteps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the agent and the orchestrator stand-in as nobody")
	}
	data := ownedDir(t, 0o700)
	targets := []string{}
	for _, name := range []string{"admin-token", "kici.db", "secret.key"} {
		f := filepath.Join(data, name)
		if err := os.WriteFile(f, []byte("secret "+name), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, int(nobody.Uid), int(nobody.Gid)); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, f)
	}
	// The orchestrator stand-in: a process of the same user with a secret
	// in its environment.
	orch := exec.Command("sleep", "300")
	orch.Env = []string{"KICI_OWNER_TOKEN=kadm_standin"}
	orch.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	if err := orch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orch.Process.Kill(); _ = orch.Wait() })
	targets = append(targets, "/proc/"+strconv.Itoa(orch.Process.Pid)+"/environ")

	// Before reading, the step tries to undo the hiding: unmount it, and
	// unmount it from a user namespace of its own.
	escape := "grep CapEff /proc/self/status\n" +
		"umount " + data + " 2>/dev/null || true\n" +
		"unshare -Urm sh -c 'umount -l " + data + " && cat " + data + "/admin-token' >/dev/null 2>&1 && echo ESCAPED || true\n" +
		"echo \"home=$HOME entries=$(ls -A \"$HOME\" | wc -l)\"\n"
	log, agentLog := runAsNobodyAgent(t, []string{"KICI_AGENT_HIDE_PATHS=" + data}, true, escape, targets)
	if strings.Contains(agentLog, "STEPS ARE NOT CONFINED") {
		t.Errorf("agent did not confine its steps:\n%s", agentLog)
	}
	if !strings.Contains(log, "CapEff:\t0000000000000000") || strings.Contains(log, "ESCAPED") {
		t.Errorf("the confined step holds capabilities or undid the hiding; step log:\n%s", log)
	}
	// The job's HOME is its own: inside its job directory, created empty.
	if !regexp.MustCompile(`home=\S*/kici-job-[a-z0-9._-]+/home entries=0\n`).MatchString(log) {
		t.Errorf("the confined step's HOME is not a fresh one of its job; step log:\n%s", log)
	}
	for _, f := range targets {
		if !strings.Contains(log, "read refused: "+f) {
			t.Errorf("the confined step could read %s; step log:\n%s", f, log)
		}
	}

	log, agentLog = runAsNobodyAgent(t, nil, false, "", targets)
	if !strings.Contains(agentLog, "STEPS ARE NOT CONFINED") {
		t.Errorf("control agent did not warn that its steps are not confined:\n%s", agentLog)
	}
	for _, f := range targets {
		if !strings.Contains(log, "read ok: "+f) {
			t.Errorf("control: the unconfined step could not read %s; step log:\n%s", f, log)
		}
	}
}
