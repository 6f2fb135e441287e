package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// TestTokenFromDescriptorNeverInEnviron starts the real binary the way the
// bare-metal scaler does — token on an inherited pipe as descriptor 3,
// KICI_AGENT_TOKEN_FD=3 — and checks that it authenticates with it, that
// the token is in no /proc/<pid>/environ (the agent's, read from outside
// and by its own step) and that steps do not inherit KICI_AGENT_TOKEN_FD.
func TestTokenFromDescriptorNeverInEnviron(t *testing.T) {
	const token = "kat_from_descriptor"
	srv := agenttest.NewServer(t, agenttest.Options{Token: token})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(token + "\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cmd := exec.Command(agentBin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "KICI_ORCHESTRATOR_URL=" + srv.URL,
		"KICI_AGENT_TOKEN_FD=3", "KICI_WORK_DIR=" + stepDir(t, 0o711)}
	cmd.ExtraFiles = []*os.File{r}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("agent output:\n%s", out.String())
		}
	})
	srv.WaitRegistrations(t, 1, 20*time.Second)
	if srv.AuthFailures() != 0 {
		t.Fatalf("agent failed to authenticate with the token from its descriptor")
	}

	environ, readErr := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ")
	if os.Geteuid() != 0 {
		// Same user, not root: the non-dumpable agent hides its environ.
		if readErr == nil {
			t.Errorf("a same-user process read the agent's environ (PR_SET_DUMPABLE not applied)")
		}
	} else if readErr != nil {
		t.Fatal(readErr)
	}
	if readErr == nil && (strings.Contains(string(environ), token) || !strings.Contains(string(environ), "KICI_AGENT_TOKEN_FD=3")) {
		t.Errorf("agent environ: token present or KICI_AGENT_TOKEN_FD missing: %q", environ)
	}

	srv.Dispatch(t, &protocol.JobDispatch{RunID: "r1", JobID: "j1"}, lockfile.Job{
		Name: "j", Checkout: boolPtr(false),
		Steps: []lockfile.Step{{Name: "probe", Run: "set +e\n" +
			"echo \"environ-hits=$(tr '\\0' '\\n' < /proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ 2>/dev/null | grep -c kat_)\"\n" +
			"echo \"own-env-fd=${KICI_AGENT_TOKEN_FD:-unset}\"\n" +
			"echo done"}},
	})
	js, _ := srv.WaitJobTerminal(t, "j1", 30*time.Second)
	log := srv.LogText("j1", 0)
	if js.State != "success" || !strings.Contains(log, "done") {
		t.Fatalf("job %s, log %q", js.State, log)
	}
	if strings.Contains(log, token) || !strings.Contains(log, "environ-hits=0") || !strings.Contains(log, "own-env-fd=unset") {
		t.Errorf("step saw the token or the descriptor variable: %q", log)
	}
}
