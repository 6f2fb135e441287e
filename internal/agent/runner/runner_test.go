package runner

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/testutil/wait"
)

func TestRetryDelay(t *testing.T) {
	exp := &lockfile.Retry{MaxAttempts: 6, DelayMs: 1000, Backoff: "exponential", MaxDelayMs: 5000}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := RetryDelay(exp, i+1); got != w {
			t.Errorf("exponential attempt %d: %s, want %s", i+1, got, w)
		}
	}
	fixed := &lockfile.Retry{MaxAttempts: 3, DelayMs: 250, Backoff: "fixed", MaxDelayMs: 100000}
	for n := 1; n <= 3; n++ {
		if got := RetryDelay(fixed, n); got != 250*time.Millisecond {
			t.Errorf("fixed attempt %d: %s", n, got)
		}
	}
	if got := RetryDelay(&lockfile.Retry{DelayMs: 1000, Backoff: "exponential"}, 200); got <= 0 || got > 25*time.Hour {
		t.Errorf("uncapped large attempt overflowed: %s", got)
	}
	if RetryDelay(nil, 1) != 0 || MaxAttempts(nil) != 1 || MaxAttempts(&lockfile.Retry{MaxAttempts: 4}) != 4 {
		t.Error("nil policy")
	}
}

func TestResolveWorkingDir(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := ResolveWorkingDir(root, "a/b"); err != nil || d != filepath.Join(root, "a", "b") {
		t.Errorf("a/b: %q %v", d, err)
	}
	if d, err := ResolveWorkingDir(root, "a/../a/b/"); err != nil || d != filepath.Join(root, "a", "b") {
		t.Errorf("normalised: %q %v", d, err)
	}
	if d, err := ResolveWorkingDir(root, ""); err != nil || d != root {
		t.Errorf("empty: %q %v", d, err)
	}
	for rel, sub := range map[string]string{
		"..":          "escapes",
		"../x":        "escapes",
		"a/../../x":   "escapes",
		"/etc":        "relative",
		"link":        "symbolic link",
		"missing/dir": "does not exist",
		"file":        "not a directory",
	} {
		if _, err := ResolveWorkingDir(root, rel); err == nil || !strings.Contains(err.Error(), sub) {
			t.Errorf("%q: err = %v, want %q", rel, err, sub)
		}
	}
}

func TestShellArgv(t *testing.T) {
	a, _ := ShellArgv("", "/s")
	if strings.Join(a, " ") != "bash --noprofile --norc -eo pipefail /s" {
		t.Errorf("bash: %v", a)
	}
	a, _ = ShellArgv("sh", "/s")
	if strings.Join(a, " ") != "sh -e /s" {
		t.Errorf("sh: %v", a)
	}
	if _, err := ShellArgv("pwsh", "/s"); err == nil {
		t.Error("pwsh accepted")
	}
}

// TestTimeoutEscalatesToSIGKILL runs a script that ignores SIGTERM and keeps
// printing; the timeout must SIGKILL the whole group after the grace. The
// timeout is long enough for bash to have run its trap before SIGTERM
// comes even on a starved machine (otherwise the TERM kills it: exit 143).
func TestTimeoutEscalatesToSIGKILL(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	script := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(script, []byte("trap '' TERM\nsleep 60 &\necho $$ $! > "+pidFile+"\nwhile true; do echo spam; sleep 0.01; done\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	start := time.Now()
	res := runProcess(procSpec{
		Argv: []string{"bash", "--noprofile", "--norc", "-eo", "pipefail", script}, Dir: dir,
		Env: []string{"PATH=" + os.Getenv("PATH")}, Stdout: &syncWriter{b: &out}, Stderr: &syncWriter{b: &out},
		Timeout: 1500 * time.Millisecond, TimeoutGrace: 300 * time.Millisecond,
	}, stopSignal{Stop: make(chan struct{}), Force: make(chan struct{}), Grace: func() time.Duration { return time.Second }})
	el := time.Since(start)
	if !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("result %+v", res)
	}
	// At least the timeout and grace (1.8 s); the upper bound only catches a
	// kill far later than asked, and is wide for a starved machine.
	if el < 1750*time.Millisecond || el > 20*time.Second {
		t.Errorf("took %s", el)
	}
	b, _ := os.ReadFile(pidFile)
	var pgid, bg int
	if _, err := fmtSscan(string(b), &pgid, &bg); err != nil {
		t.Fatalf("pids %q: %v", b, err)
	}
	wait.Until(5*time.Second, func() bool { return syscall.Kill(bg, 0) != nil || isZombie(bg) })
	if err := syscall.Kill(bg, 0); err == nil && !isZombie(bg) {
		t.Errorf("background child %d survived", bg)
	}
}
