package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

// stepDir returns a fresh directory directly under the system temp dir with
// mode, removed at the end: as root the agent runs steps as an unprivileged
// user, which can neither enter t.TempDir()'s private parent nor write a
// 0755 directory of root's.
func stepDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kici-agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// sleepMark is a `sleep` duration (300 s and a random fraction) that names
// one process: a step's pids are those of its own PID namespace, so the
// test finds the host's pid by the argument instead (hostPidOf).
func sleepMark() string {
	return fmt.Sprintf("300.%09d", time.Now().UnixNano()%1e9)
}

// hostPidOf returns the host pid of a live process whose argv has arg, 0
// when there is none.
func hostPidOf(arg string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg && pidAlive(pid) {
				return pid
			}
		}
	}
	return 0
}

// waitHostPid waits for a step's process with arg in its argv to run and
// returns its host pid.
func waitHostPid(t *testing.T, arg string) int {
	t.Helper()
	var pid int
	if !wait.Until(20*time.Second, func() bool { pid = hostPidOf(arg); return pid > 0 }) {
		t.Fatalf("the step's sleep %s never ran", arg)
	}
	return pid
}

// TestKilledAgentTakesItsStepsProcessTreeWithIt: kill -9 of a static agent
// while its step runs `sleep 300` (a child of the step's shell, plus one
// that left the process group with setsid) leaves neither running.
// Before the step supervisor, the shell died with the agent but its
// children ran on. Both layouts: kici-step-supervisor installed beside the
// agent, and the agent alone (re-executed as the supervisor).
func TestKilledAgentTakesItsStepsProcessTreeWithIt(t *testing.T) {
	t.Run("installed", func(t *testing.T) { killedAgentTakesStepsWithIt(t, installedAgentBin) })
	t.Run("agent alone", func(t *testing.T) { killedAgentTakesStepsWithIt(t, agentBin) })
}

func killedAgentTakesStepsWithIt(t *testing.T, bin string) {
	srv := agenttest.NewServer(t, agenttest.Options{})
	p := startBinFrom(t, bin, nil, []string{"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_WORK_DIR=" + stepDir(t, 0o711)})
	srv.WaitRegistrations(t, 1, 20*time.Second)
	childMark, escapedMark := sleepMark(), sleepMark()+"1"
	srv.Dispatch(t, &protocol.JobDispatch{RunID: "r1", JobID: "j1"}, lockfile.Job{
		Name: "j", Checkout: boolPtr(false), Steps: []lockfile.Step{{Name: "deploy", Run: "" +
			"setsid sh -c 'exec sleep " + escapedMark + "' &\n" +
			"sh -c 'exec sleep " + childMark + "'\n"}},
	})
	child := waitHostPid(t, childMark)
	escaped := waitHostPid(t, escapedMark)
	if !pidAlive(child) || !pidAlive(escaped) {
		t.Fatal("step processes not running before the kill")
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 10*time.Second)
	wait.Until(5*time.Second, func() bool { return !pidAlive(child) && !pidAlive(escaped) })
	if pidAlive(child) {
		t.Errorf("the step's sleep 300 (pid %d) outlived the killed agent", child)
	}
	if pidAlive(escaped) {
		t.Errorf("the step's setsid sleep 300 (pid %d) outlived the killed agent", escaped)
	}
}

func TestSupervisorPrefixPrefersTheInstalledSupervisor(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "kici-agent")
	if got := supervisorPrefix(self); len(got) != 2 || got[0] != self || got[1] != runner.SupervisorArg {
		t.Errorf("without kici-step-supervisor: %q, want the agent re-executed", got)
	}
	sup := filepath.Join(dir, "kici-step-supervisor")
	if err := os.WriteFile(sup, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := supervisorPrefix(self); len(got) != 2 {
		t.Errorf("with a kici-step-supervisor that is not executable: %q, want the agent re-executed", got)
	}
	if err := os.Chmod(sup, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := supervisorPrefix(self); len(got) != 1 || got[0] != sup {
		t.Errorf("with kici-step-supervisor beside the agent: %q, want it", got)
	}
}
