package runner

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

type recorder struct {
	mu   sync.Mutex
	msgs []any
}

func (r *recorder) Send(msg any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
}

// cleanupJob builds a dispatch whose first step traps SIGTERM and sleeps
// (recording its pid and that of a background child), followed by a normal
// step and cleanup steps.
func cleanupJob(t *testing.T, dir string, grace int) *protocol.JobDispatch {
	t.Helper()
	no := false
	job := lockfile.Job{Type: lockfile.JobStatic, Name: "deploy", Checkout: &no, GracePeriod: grace, Steps: []lockfile.Step{
		{Name: "stubborn", Run: "trap '' TERM\nsleep 300 &\necho $$ $! > " + filepath.Join(dir, "pids") + "\nwhile true; do sleep 0.05; done"},
		{Name: "never", Run: "touch " + filepath.Join(dir, "never")},
		{Name: "on-failure-only", RunOn: []string{"failed"}, Run: "touch " + filepath.Join(dir, "onfail")},
		{Name: "unlock", RunOn: []string{"cancelled"}, Run: "touch " + filepath.Join(dir, "unlocked")},
		{Name: "report", RunOn: []string{"success", "failed", "cancelled"}, Run: "touch " + filepath.Join(dir, "reported")},
	}}
	cfg, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return &protocol.JobDispatch{RunID: "r1", JobID: "j1", JobName: "deploy", JobConfig: cfg}
}

func waitPids(t *testing.T, dir string) (int, int) {
	t.Helper()
	var f []string
	wait.For(t, 10*time.Second, "the step to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "pids"))
		f = strings.Fields(string(b))
		return len(f) == 2
	})
	a, _ := strconv.Atoi(f[0])
	c, _ := strconv.Atoi(f[1])
	return a, c
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil && !isZombie(pid) }

// TestGracefulCancelEscalatesThenRunsCleanupSteps proves that a graceful cancel sends SIGTERM, waits the job's gracePeriod, SIGKILLs
// the step's whole process group, then runs the steps marked to run on
// cancel (and only those), and the job ends cancelled.
func TestGracefulCancelEscalatesThenRunsCleanupSteps(t *testing.T) {
	dir := t.TempDir()
	rec := &recorder{}
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: []string{"PATH=" + os.Getenv("PATH")}}, rec)
	d := cleanupJob(t, dir, 1)
	done := make(chan *Result, 1)
	go func() { done <- r.Run(context.Background(), d) }()
	shell, child := waitPids(t, dir)
	start := time.Now()
	if !r.Cancel("j1", "cancelled by admin", false) {
		t.Fatal("Cancel reported the job as not running")
	}
	var res *Result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("job did not end after cancel")
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("job ended %s after a graceful cancel; the 1 s grace was not honoured", el)
	}
	if res.State != status.JobCancelled || res.Error != "cancelled by admin" {
		t.Errorf("result %s %q, want cancelled with the reason", res.State, res.Error)
	}
	got := []string{}
	for _, s := range res.Steps {
		got = append(got, string(s.Status))
	}
	if strings.Join(got, ",") != "cancelled,skipped,skipped,success,success" {
		t.Errorf("step statuses = %v", got)
	}
	for name, want := range map[string]bool{"never": false, "onfail": false, "unlocked": true, "reported": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("marker %s exists = %v, want %v", name, err == nil, want)
		}
	}
	for _, pid := range []int{shell, child} {
		if alive(pid) {
			t.Errorf("process %d of the cancelled step survived", pid)
		}
	}
}

// TestForcedCancelSkipsCleanup: a forced cancel SIGKILLs at once and runs
// no cleanup step.
func TestForcedCancelSkipsCleanup(t *testing.T) {
	dir := t.TempDir()
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: []string{"PATH=" + os.Getenv("PATH")}}, &recorder{})
	d := cleanupJob(t, dir, 10)
	done := make(chan *Result, 1)
	go func() { done <- r.Run(context.Background(), d) }()
	shell, child := waitPids(t, dir)
	start := time.Now()
	r.Cancel("j1", "forced", true)
	res := <-done
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("forced cancel took %s", el)
	}
	if res.State != status.JobCancelled {
		t.Errorf("state %s", res.State)
	}
	for _, name := range []string{"unlocked", "reported", "never"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("step %s ran after a forced cancel", name)
		}
	}
	for _, pid := range []int{shell, child} {
		if alive(pid) {
			t.Errorf("process %d survived", pid)
		}
	}
}

// TestOnFailureStepRunsAfterFailure: a failing step skips normal steps and
// runs on-failure and always steps; the job stays failed.
func TestOnFailureStepRunsAfterFailure(t *testing.T) {
	dir := t.TempDir()
	no := false
	job := lockfile.Job{Type: lockfile.JobStatic, Name: "j", Checkout: &no, Steps: []lockfile.Step{
		{Name: "boom", Run: "exit 4"},
		{Name: "next", Run: "touch " + filepath.Join(dir, "next")},
		{Name: "notify", RunOn: []string{"failed"}, Run: "touch " + filepath.Join(dir, "notified")},
		{Name: "unlock", RunOn: []string{"cancelled"}, Run: "touch " + filepath.Join(dir, "unlocked")},
	}}
	cfg, _ := json.Marshal(job)
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: []string{"PATH=" + os.Getenv("PATH")}}, &recorder{})
	res := r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "j", JobConfig: cfg})
	if res.State != status.JobFailed || !strings.Contains(res.Error, `"boom"`) {
		t.Errorf("result %s %q", res.State, res.Error)
	}
	for name, want := range map[string]bool{"next": false, "notified": true, "unlocked": false} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("marker %s exists = %v, want %v", name, err == nil, want)
		}
	}
}

// TestNoisyStepKilledAtJobDeadlineAndCleanupRuns proves that
// a step that prints continuously is still killed at the job's deadline
// (within timeout + grace), and the failure-path cleanup step runs on the
// timeout path too.
func TestNoisyStepKilledAtJobDeadlineAndCleanupRuns(t *testing.T) {
	dir := t.TempDir()
	no := false
	job := lockfile.Job{Type: lockfile.JobStatic, Name: "noisy", Checkout: &no, Timeout: 800, GracePeriod: 1, Steps: []lockfile.Step{
		{Name: "spam", Run: "trap '' TERM\nwhile true; do echo spam; done"},
		{Name: "report", RunOn: []string{"failed"}, Run: "touch " + filepath.Join(dir, "reported")},
	}}
	cfg, _ := json.Marshal(job)
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: []string{"PATH=" + os.Getenv("PATH")}, MaxLogBytes: 1 << 16}, &recorder{})
	start := time.Now()
	res := r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "j", JobConfig: cfg})
	el := time.Since(start)
	if res.State != status.JobFailed || !strings.HasPrefix(res.Error, "job_timeout:") {
		t.Errorf("result %s %q, want failed job_timeout", res.State, res.Error)
	}
	if el > 6*time.Second {
		t.Errorf("job ended %s after start; deadline 0.8 s + 1 s grace", el)
	}
	if _, err := os.Stat(filepath.Join(dir, "reported")); err != nil {
		t.Error("the on-failure cleanup step did not run after the job timeout")
	}
}

// TestServerCancelStopsJobBlockedInNetworkCall proves that when the
// orchestrator ends a job (job.cancel, forced as for a server-side
// deadline) while the agent is stuck in a network call (a checkout from a
// server that never answers), the agent stops at once.
func TestServerCancelStopsJobBlockedInNetworkCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connected := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold the connection open, never answer
			select {
			case connected <- struct{}{}:
			default:
			}
		}
	}()
	job := lockfile.Job{Type: lockfile.JobStatic, Name: "stuck", Steps: []lockfile.Step{{Name: "s", Run: "echo never"}}}
	cfg, _ := json.Marshal(job)
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: []string{"PATH=" + os.Getenv("PATH")}}, &recorder{})
	done := make(chan *Result, 1)
	go func() {
		done <- r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "j", JobConfig: cfg,
			RepoURL: "http://" + ln.Addr().String() + "/repo.git", SHA: strings.Repeat("a", 40)})
	}()
	select { // the checkout is now blocked on the server that never answers
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the checkout never connected")
	}
	start := time.Now()
	r.Cancel("j", "job_timeout: ended by the orchestrator", true)
	select {
	case res := <-done:
		if res.State != status.JobCancelled {
			t.Errorf("state %s %q", res.State, res.Error)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("job stopped %s after the cancel", el)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("job blocked in its checkout ignored the cancel")
	}
}
