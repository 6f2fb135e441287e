package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// agentBin is kici-agent alone (steps run under the agent re-executed as
// their supervisor); installedAgentBin has kici-step-supervisor beside it.
var agentBin, installedAgentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kici-agent-bin-")
	if err != nil {
		panic(err)
	}
	agentBin = filepath.Join(dir, "kici-agent")
	_ = os.Chmod(dir, 0o755) // agents started as another user exec it too
	out, err := exec.Command("go", "build", "-o", agentBin, ".").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		panic("building kici-agent: " + err.Error() + "\n" + string(out))
	}
	// The installed layout: kici-step-supervisor beside a copy of the agent.
	installedAgentBin = filepath.Join(dir, "installed", "kici-agent")
	_ = os.Mkdir(filepath.Dir(installedAgentBin), 0o755)
	out, err = exec.Command("go", "build", "-o", filepath.Dir(installedAgentBin)+"/", ".", "../kici-step-supervisor").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		panic("building kici-agent and kici-step-supervisor: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type proc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

func startBin(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startBinAs(t, nil, env, args...)
}

// startBinAs is startBin as cred (nil: the test's own user).
func startBinAs(t *testing.T, cred *syscall.Credential, env []string, args ...string) *proc {
	t.Helper()
	return startBinFrom(t, agentBin, cred, env, args...)
}

// startBinFrom is startBinAs of the agent binary bin.
func startBinFrom(t *testing.T, bin string, cred *syscall.Credential, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: &stderr, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatal(err)
	case <-time.After(timeout):
		t.Fatalf("kici-agent did not exit within %s; output:\n%s", timeout, p.stderr.String())
	}
	return -1
}

func TestHelpAndVersion(t *testing.T) {
	out, err := exec.Command(agentBin, "--help").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(out))
	}
	for _, v := range []string{"KICI_ORCHESTRATOR_URL", "KICI_AGENT_TOKEN", "KICI_SCALER_MANAGED", "KICI_WORK_DIR", "KICI_DEFAULT_STEP_TIMEOUT_MS"} {
		if !strings.Contains(string(out), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
	out, err = exec.Command(agentBin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kici-agent ") {
		t.Errorf("version: %q %v", out, err)
	}
	cmd := exec.Command(agentBin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "KICI_ORCHESTRATOR_URL is required") {
		t.Errorf("missing URL: %q %v", out, err)
	}
}

// TestScalerManagedRunsOneJobAndLeavesNothing runs the real binary as a
// scaler-managed agent: it must run the dispatched job, exit 0, and leave
// neither its own process group nor the step's behind.
func TestScalerManagedRunsOneJobAndLeavesNothing(t *testing.T) {
	srv := agenttest.NewServer(t, agenttest.Options{Token: "kat_test", PendingDispatch: true})
	work := stepDir(t, 0o711)
	mark := sleepMark()
	p := startBin(t, []string{
		"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_AGENT_TOKEN=kat_test", "KICI_AGENT_ID=spawned-1",
		"KICI_SCALER_MANAGED=true", "KICI_WORK_DIR=" + work,
	})
	srv.WaitRegistrations(t, 1, 20*time.Second)
	if reg := srv.Registrations()[0]; reg.AgentID != "spawned-1" || !reg.ScalerManaged {
		t.Errorf("register: %+v", reg)
	}
	srv.Dispatch(t, &protocol.JobDispatch{RunID: "r1", JobID: "j1", JobName: "j"}, lockfile.Job{
		Name: "j", Checkout: boolPtr(false),
		Steps: []lockfile.Step{{Name: "bg", Run: "sleep " + mark + " &\necho started"}},
	})
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
	js, _ := srv.WaitJobTerminal(t, "j1", time.Second)
	if js.State != "success" {
		t.Errorf("job %s (%+v)", js.State, js.Data)
	}
	if !strings.Contains(srv.LogText("j1", 0), "started") {
		t.Errorf("log: %q", srv.LogText("j1", 0))
	}
	if g := p.cmd.Process.Pid; groupAlive(g) {
		t.Errorf("the agent's process group %d still has live processes", g)
	}
	if pid := hostPidOf(mark); pid > 0 {
		t.Errorf("background step process sleep %s (pid %d) survived", mark, pid)
	}
	// Nothing of the job stays, not even a HOME: each job had its own.
	// What may stay is the host's: a root agent's note that the job
	// sandbox works on this boot (the next agent skips the probe), private
	// to root.
	ents, _ := os.ReadDir(work)
	for _, e := range ents {
		if e.Name() == ".kici-sandbox-probed" {
			if fi, err := e.Info(); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("sandbox note %v (%v), want mode 0600", fi, err)
			}
			continue
		}
		t.Errorf("work dir left behind: %v", e.Name())
	}
}

func TestSIGTERMCancelsRunningJob(t *testing.T) {
	srv := agenttest.NewServer(t, agenttest.Options{})
	p := startBin(t, []string{"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_WORK_DIR=" + stepDir(t, 0o711)})
	srv.WaitRegistrations(t, 1, 20*time.Second)
	srv.Dispatch(t, &protocol.JobDispatch{RunID: "r1", JobID: "j1"}, lockfile.Job{
		Name: "j", Checkout: boolPtr(false), Steps: []lockfile.Step{{Name: "wait", Run: "sleep 300"}, {Name: "later", Run: "true"}},
	})
	srv.WaitMessage(t, 10*time.Second, "step running", func(r agenttest.Received) bool {
		s, ok := r.Msg.(*protocol.StepStatus)
		return ok && s.State == "running"
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, p.stderr.String())
	}
	js, _ := srv.WaitJobTerminal(t, "j1", time.Second)
	if js.State != "cancelled" || js.Data.Error != "agent shutting down" {
		t.Errorf("job: %+v %+v", js, js.Data)
	}
	st := srv.FinalStepStatuses("j1")
	if st[0].State != "cancelled" || st[1].State != "skipped" {
		t.Errorf("steps %s %s", st[0].State, st[1].State)
	}
}

func TestAuthFailureExitsWithError(t *testing.T) {
	srv := agenttest.NewServer(t, agenttest.Options{Token: "kat_right"})
	p := startBin(t, []string{"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_AGENT_TOKEN=kat_wrong"})
	if code := p.wait(t, 20*time.Second); code != 1 {
		t.Fatalf("exit code %d", code)
	}
	out := p.stderr.String()
	if !strings.Contains(out, "authentication failed") || strings.Contains(out, "kat_wrong") {
		t.Errorf("output:\n%s", out)
	}
	if srv.AuthFailures() != 1 {
		t.Errorf("auth attempts %d", srv.AuthFailures())
	}
}

func boolPtr(b bool) *bool { return &b }

func pidAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, ok := procStat(pid)
	return ok && st.state != "Z"
}

type stat struct {
	state string
	pgrp  int
}

func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return stat{}, false
	}
	g, _ := strconv.Atoi(f[2])
	return stat{state: f[0], pgrp: g}, true
}

// groupAlive reports whether a non-zombie process is in group pgid.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return false
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.pgrp == pgid && st.state != "Z" {
			return true
		}
	}
	return false
}
