package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// TestMain runs Main instead of the tests when the test binary is started
// as a supervisor by the tests below.
func TestMain(m *testing.M) {
	if os.Getenv("KICI_SUPERVISOR_TEST") == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// startSupervised starts this test binary as the supervisor of the shell
// script, in its own process group, with a lifeline whose write end it
// returns.
func startSupervised(t *testing.T, script string) (*exec.Cmd, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], Argv([]string{Arg}, nil, []string{"/bin/sh", "-c", script})...)
	cmd.Env = append(os.Environ(), "KICI_SUPERVISOR_TEST=1")
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() {
		w.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	return cmd, w
}

// pidFrom waits for a process of the step to write its pid to path.
func pidFrom(t *testing.T, path string) int {
	t.Helper()
	var pid int
	if wait.Until(10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}) {
		return pid
	}
	t.Fatal("the step never wrote its pid")
	return 0
}

// gone reports whether pid has ended (or is a zombie nobody reaped yet).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

func TestShellExitKillsWhatTheStepLeftBehind(t *testing.T) {
	marks := t.TempDir()
	escaped := filepath.Join(marks, "escaped")
	cmd, _ := startSupervised(t, "setsid sh -c 'echo $$ > "+escaped+"; exec sleep 300' & "+
		"while [ ! -s "+escaped+" ]; do sleep 0.01; done; exit 3")
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("supervisor ended with %v, want the shell's exit code 3", err)
	}
	if pid := pidFrom(t, escaped); !gone(pid) {
		t.Errorf("the step's setsid sleep (pid %d) outlived the step", pid)
	}
}

func TestLostLifelineKillsTheStep(t *testing.T) {
	marks := t.TempDir()
	child := filepath.Join(marks, "child")
	cmd, lifeline := startSupervised(t, "sh -c 'echo $$ > "+child+"; exec sleep 300'")
	pid := pidFrom(t, child)
	lifeline.Close() // as when the agent dies
	_ = cmd.Wait()
	// It SIGKILLs its whole process group, itself included, or exits 137.
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) && ws.ExitStatus() != SignalExitBase+int(syscall.SIGKILL) {
		t.Fatalf("supervisor ended with %v, want SIGKILL or exit %d", cmd.ProcessState, SignalExitBase+int(syscall.SIGKILL))
	}
	wait.Until(5*time.Second, func() bool { return gone(pid) })
	if !gone(pid) {
		t.Errorf("the step's sleep (pid %d) outlived its agent", pid)
	}
}

func TestBadArgumentsExit127(t *testing.T) {
	for _, args := range [][]string{nil, {"x", "y", "--"}, {"1", "nope", "--", "true"}, {"-", "-", "true", "x"}} {
		if code := Main(args); code != 127 {
			t.Errorf("Main(%q) = %d, want 127", args, code)
		}
	}
}

func TestArgvCarriesTheCredential(t *testing.T) {
	got := Argv([]string{"sup", NamespacesFlag}, Credential(1001, 1002), []string{"sh", "-c", "x"})
	want := []string{"sup", NamespacesFlag, "1001", "1002", "--", "sh", "-c", "x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Argv = %q, want %q", got, want)
	}
	if c := Credential(5, 6); c.Uid != 5 || c.Gid != 6 || c.Groups == nil || len(c.Groups) != 0 {
		t.Errorf("Credential = %+v, want no supplementary groups (an empty, non-nil list)", c)
	}
}

func TestDescendantsFromChildrenListsMatchAFullScan(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range descendantsByScan(os.Getpid()) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = cmd.Wait()
	}()
	var scan []int
	wait.Until(5*time.Second, func() bool { scan = descendantsByScan(os.Getpid()); return len(scan) >= 4 })
	if len(scan) != 4 {
		t.Fatalf("scan found %v, want the shell, two sleeps and the inner shell", scan)
	}
	byChildren, ok := descendantsByChildren(os.Getpid())
	if !ok {
		t.Fatal("this kernel has no /proc/<pid>/task/<tid>/children: the fallback is all that runs")
	}
	key := func(ps []int) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = strconv.Itoa(p)
		}
		sort.Strings(s)
		return strings.Join(s, ",")
	}
	if key(byChildren) != key(scan) {
		t.Errorf("children lists give %v, the scan %v", byChildren, scan)
	}
}
