package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/agent/conn"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

type harness struct {
	srv     *agenttest.Server
	agent   *Agent
	cfg     *Config
	workDir string
	cancel  context.CancelFunc
	done    chan error
	// registeredHooks counts calls of Options.Registered.
	registeredHooks atomic.Int32
	// logPath is the agent's debug log.
	logPath string
}

func startAgent(t *testing.T, srvOpts agenttest.Options, mod func(*Config)) *harness {
	t.Helper()
	return startAgentWith(t, srvOpts, mod, -1)
}

// startAgentWith is startAgent with Options.IdleTrimAfter set to trimAfter
// (startAgent: never, so that no other test pays forced collections).
func startAgentWith(t *testing.T, srvOpts agenttest.Options, mod func(*Config), trimAfter time.Duration) *harness {
	t.Helper()
	srv := agenttest.NewServer(t, srvOpts)
	work := t.TempDir()
	cfg, err := LoadConfig([]string{
		"KICI_ORCHESTRATOR_URL=" + srv.URL,
		"KICI_AGENT_ID=test-agent",
		"KICI_LABELS=linux-box, fast",
		"KICI_WORK_DIR=" + work,
		"KICI_JOB_HEARTBEAT_INTERVAL_MS=100",
	})
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(cfg)
	}
	hostEnv := append(os.Environ(), "KICI_AGENT_TOKEN=kat_must_not_leak", "SECRET_HOST_VAR=nope")
	// The agent's log, shown when the test fails (a reconnect that never
	// came says why there).
	logPath := filepath.Join(t.TempDir(), "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("agent log:\n%s", b)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{srv: srv, cfg: cfg, workDir: work, cancel: cancel, done: make(chan error, 1)}
	a := New(cfg, slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})), Options{
		HostEnv:           hostEnv,
		Backoff:           func(int) time.Duration { return 50 * time.Millisecond },
		HeartbeatInterval: 100 * time.Millisecond,
		StepTimeoutGrace:  time.Second,
		Registered:        func() { h.registeredHooks.Add(1) },
		IdleTrimAfter:     trimAfter,
	})
	h.agent = a
	h.logPath = logPath
	go func() { h.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop")
		}
	})
	return h
}

func (h *harness) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(timeout):
		t.Fatal("agent did not exit")
		return nil
	}
}

func ptr[T any](v T) *T { return &v }

func TestAgentRunsJobEndToEnd(t *testing.T) {
	repo, sha := agenttest.GitRepo(t, map[string]string{"hello.txt": "from the repo\n", "sub/dir/x.txt": "x"})
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)

	reg := h.srv.Registrations()[0]
	for _, want := range []string{"linux-box", "fast", "kici:os:linux", "kici:host:" + h.cfg.Hostname} {
		if !contains(reg.Labels, want) {
			t.Errorf("labels %v lack %q", reg.Labels, want)
		}
	}
	if reg.AgentID != "test-agent" || reg.MaxConcurrency != 1 || reg.Version == "" || reg.Platform == "" {
		t.Errorf("register frame: %+v", reg)
	}

	job := lockfile.Job{
		Type: lockfile.JobStatic, Name: "build",
		Env: map[string]string{"JOB_VAR": "job", "OVERRIDE": "job"},
		Steps: []lockfile.Step{
			{Name: "hello", Run: "cat hello.txt\necho \"job=$KICI_JOB_ID ws=$KICI_WORKSPACE var=$JOB_VAR/$OVERRIDE\"\necho \"token=${KICI_AGENT_TOKEN:-unset} host=${SECRET_HOST_VAR:-unset}\"\necho to-stderr >&2\npwd",
				Env: map[string]string{"OVERRIDE": "step"}},
			{Name: "soft-fail", Run: "echo soft; exit 7", ContinueOnError: true},
			{Name: "loop-timeout", Run: "while true; do echo tick; sleep 0.05; done", Timeout: 700, ContinueOnError: true},
			{Name: "in-subdir", Run: "pwd; cat x.txt", WorkingDirectory: "sub/dir"},
			{Name: "hard-fail", Run: "echo failing; exit 3"},
			{Name: "never", Run: "echo should-not-run"},
		},
	}
	h.srv.Dispatch(t, &protocol.JobDispatch{
		RunID: "run-1", JobID: "job-1", JobName: "build", WorkflowName: "ci",
		RepoURL: "file://" + repo, Ref: "refs/heads/main", SHA: sha,
		Env: map[string]string{"KICI_JOB_ID": "job-1", "CI": "true"},
	}, job)

	js, _ := h.srv.WaitJobTerminal(t, "job-1", 30*time.Second)
	if js.State != status.JobFailed || js.Data == nil || !strings.Contains(js.Data.Error, `"hard-fail"`) {
		t.Fatalf("job status: %+v %+v", js, js.Data)
	}
	wantSteps := []status.Step{status.StepSuccess, status.StepFailed, status.StepFailed, status.StepSuccess, status.StepFailed, status.StepSkipped}
	if len(js.Data.StepResults) != len(wantSteps) {
		t.Fatalf("stepResults: %+v", js.Data.StepResults)
	}
	for i, w := range wantSteps {
		if js.Data.StepResults[i].Status != w {
			t.Errorf("stepResults[%d] = %+v, want %s", i, js.Data.StepResults[i], w)
		}
	}

	// Order: ack, running, ..., terminal.
	msgs := h.srv.Messages()
	if _, ok := msgs[0].Msg.(*protocol.JobAck); !ok {
		t.Errorf("first frame after register = %T, want job.ack", msgs[0].Msg)
	}
	if s, ok := msgs[1].Msg.(*protocol.JobStatus); !ok || s.State != status.JobRunning {
		t.Errorf("second frame = %#v, want job.status running", msgs[1].Msg)
	}

	final := h.srv.FinalStepStatuses("job-1")
	check := func(i int, state status.Step, exit int, errSub string) {
		t.Helper()
		ss := final[i]
		if ss == nil {
			t.Fatalf("no status for step %d", i)
		}
		if ss.State != state {
			t.Errorf("step %d state %s, want %s (%+v)", i, ss.State, state, ss.Data)
		}
		if exit >= 0 && (ss.Data == nil || ss.Data.ExitCode == nil || *ss.Data.ExitCode != exit) {
			t.Errorf("step %d exit code %+v, want %d", i, ss.Data, exit)
		}
		if errSub != "" && (ss.Data == nil || !strings.Contains(ss.Data.Error, errSub)) {
			t.Errorf("step %d error %+v, want %q", i, ss.Data, errSub)
		}
	}
	check(0, status.StepSuccess, 0, "")
	check(1, status.StepFailed, 7, "exit code 7")
	check(2, status.StepFailed, 143, "step timed out after 700ms")
	check(3, status.StepSuccess, 0, "")
	check(4, status.StepFailed, 3, "exit code 3")
	check(5, status.StepSkipped, -1, "")
	if final[0].LogBytesStreamed == 0 {
		t.Errorf("step 0 logBytesStreamed = 0")
	}

	log0 := h.srv.LogText("job-1", 0)
	for _, want := range []string{"from the repo", "job=job-1", "var=job/step", "token=unset host=unset", "to-stderr", "/src"} {
		if !strings.Contains(log0, want) {
			t.Errorf("step 0 log lacks %q:\n%s", want, log0)
		}
	}
	if strings.Contains(log0, "kat_must_not_leak") {
		t.Error("agent token reached the step")
	}
	if n := strings.Count(h.srv.LogText("job-1", 2), "tick"); n < 3 {
		t.Errorf("timeout step printed %d ticks", n)
	}
	if !strings.Contains(h.srv.LogText("job-1", 3), "sub/dir") {
		t.Errorf("step 3 log: %s", h.srv.LogText("job-1", 3))
	}
	if strings.Contains(h.srv.LogText("job-1", 5), "should-not-run") {
		t.Error("skipped step ran")
	}
	if ck := h.srv.LogText("job-1", -1); !strings.Contains(ck, "HEAD is now at "+sha) {
		t.Errorf("checkout log: %s", ck)
	}
	// stderr shares stdout's stream, in write order; seq numbering.
	var seqs []int64
	for _, lc := range h.srv.Logs("job-1") {
		seqs = append(seqs, lc.Seq)
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("log seqs not 0..n: %v", seqs)
		}
	}
	if a, b := strings.Index(log0, "token=unset"), strings.Index(log0, "to-stderr"); a < 0 || b < a || !strings.Contains(log0[b:], "/src") {
		t.Errorf("stderr line out of write order:\n%s", log0)
	}
	// Job heartbeats were sent while running.
	hb := 0
	for _, m := range msgs {
		if _, ok := m.Msg.(*protocol.JobHeartbeat); ok {
			hb++
		}
	}
	if hb == 0 {
		t.Error("no job.heartbeat")
	}
	connHB := 0
	for _, m := range h.srv.Messages() {
		if _, ok := m.Msg.(*protocol.Heartbeat); ok {
			connHB++
		}
	}
	if connHB == 0 {
		t.Error("no connection heartbeat")
	}
	// Job directory removed (the host's mirror cache stays).
	if ents := jobDirs(h.workDir); len(ents) != 0 {
		t.Errorf("work dir not cleaned: %v", ents)
	}
}

func TestAgentRejectsWhenBusyAndCancels(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	pidFile := filepath.Join(t.TempDir(), "pid")
	job := lockfile.Job{Name: "slow", Checkout: ptr(false), Steps: []lockfile.Step{
		{Name: "sleep", Run: "echo $$ > " + pidFile + "\nsleep 30 & wait"},
		{Name: "after", Run: "echo after"},
	}}
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "j1"}, job)
	h.srv.WaitMessage(t, 10*time.Second, "step running", func(r agenttest.Received) bool {
		ss, ok := r.Msg.(*protocol.StepStatus)
		return ok && ss.State == status.StepRunning
	})
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "j2"}, job)
	rej := h.srv.WaitMessage(t, 10*time.Second, "job.reject", func(r agenttest.Received) bool {
		_, ok := r.Msg.(*protocol.JobReject)
		return ok
	}).Msg.(*protocol.JobReject)
	if rej.JobID != "j2" || rej.Reason != protocol.RejectBusy {
		t.Errorf("reject: %+v", rej)
	}
	waitFile(t, pidFile)
	// A reconnect while the job runs reports it in inFlightJobs.
	h.srv.Drop()
	h.srv.WaitRegistrations(t, 2, 10*time.Second)
	if in := h.srv.Registrations()[1].InFlightJobs; len(in) != 1 || in[0].JobID != "j1" || in[0].RunID != "r" {
		t.Errorf("re-register inFlightJobs = %+v", in)
	}
	if err := h.srv.Send(&protocol.JobCancel{Type: protocol.TypeJobCancel, RunID: "r", JobID: "j1", Reason: "user cancelled"}); err != nil {
		t.Fatal(err)
	}
	js, _ := h.srv.WaitJobTerminal(t, "j1", 20*time.Second)
	if js.State != status.JobCancelled || js.Data.Error != "user cancelled" {
		t.Fatalf("job: %+v %+v", js, js.Data)
	}
	final := h.srv.FinalStepStatuses("j1")
	if final[0].State != status.StepCancelled || final[1].State != status.StepSkipped {
		t.Errorf("steps: %+v %+v", final[0], final[1])
	}
	pgid := readPid(t, pidFile)
	if groupAlive(pgid) {
		t.Errorf("process group %d still alive after cancel", pgid)
	}
}

func TestAgentReconnectDeliversTerminalStatus(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	job := lockfile.Job{Name: "j", Checkout: ptr(false), Steps: []lockfile.Step{
		{Name: "s", Run: "echo before; sleep 1; echo after"},
	}}
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "jr"}, job)
	h.srv.WaitMessage(t, 10*time.Second, "step running", func(r agenttest.Received) bool {
		ss, ok := r.Msg.(*protocol.StepStatus)
		return ok && ss.State == status.StepRunning
	})
	// Keep the agent away until the job has finished, so the terminal
	// statuses are produced while disconnected and must be buffered.
	h.srv.Refuse(true)
	h.srv.Drop()
	workDone := func() bool { return len(jobDirs(h.workDir)) == 0 }
	if !wait.Until(15*time.Second, workDone) {
		t.Fatal("job did not finish while disconnected")
	}
	if h.srv.Refused() == 0 {
		t.Error("agent did not try to reconnect")
	}
	h.srv.Refuse(false)
	h.srv.WaitRegistrations(t, 2, 10*time.Second)
	// The terminal status was not delivered yet, so the job is still
	// reported in flight.
	if in := h.srv.Registrations()[1].InFlightJobs; len(in) != 1 || in[0].JobID != "jr" {
		t.Errorf("re-register inFlightJobs = %+v", in)
	}

	js, connNo := h.srv.WaitJobTerminal(t, "jr", 20*time.Second)
	if js.State != status.JobSuccess || connNo != 2 {
		t.Errorf("terminal status %s on connection %d", js.State, connNo)
	}
	if !strings.Contains(h.srv.LogText("jr", 0), "after") {
		t.Errorf("log: %q", h.srv.LogText("jr", 0))
	}
	if st := h.srv.FinalStepStatuses("jr")[0]; st == nil || st.State != status.StepSuccess {
		t.Errorf("step status %+v", st)
	}
}

// TestRegisteredHookRunsOnceAcrossReconnects: kici-agent releases its
// start-up pages in Options.Registered, which must run after the first
// register.ack only, not after every reconnect.
func TestRegisteredHookRunsOnceAcrossReconnects(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	if !wait.Until(5*time.Second, func() bool { return h.registeredHooks.Load() == 1 }) {
		t.Fatalf("Registered ran %d times after the first register.ack, want 1", h.registeredHooks.Load())
	}
	for n := 2; n <= 3; n++ {
		h.srv.Drop()
		h.srv.WaitRegistrations(t, n, 10*time.Second)
	}
	// The third register.ack has been handled once a heartbeat after it
	// arrived; by then a second call would have happened.
	h.srv.WaitMessage(t, 10*time.Second, "heartbeat on the third connection", func(r agenttest.Received) bool {
		_, ok := r.Msg.(*protocol.Heartbeat)
		return ok && r.Conn == 3
	})
	if got := h.registeredHooks.Load(); got != 1 {
		t.Fatalf("Registered ran %d times over three registrations, want 1", got)
	}
}

// TestAgentSweepsItsWorkRootAtStart: what crashed jobs left in the work
// root (their directory, one moved aside that could not be removed) is
// removed when the agent starts, whatever job comes next
// (runner.SweepWorkRoot).
func TestAgentSweepsItsWorkRootAtStart(t *testing.T) {
	var left []string
	h := startAgent(t, agenttest.Options{}, func(cfg *Config) {
		for _, name := range []string{"kici-job-gone-0123abcd", "kici-job-build-0123abcd.left-0123456789ab"} {
			dir := filepath.Join(cfg.WorkDir, name)
			if err := os.MkdirAll(filepath.Join(dir, "src"), 0o700); err != nil {
				t.Fatal(err)
			}
			left = append(left, dir)
		}
	})
	removed := func() int {
		b, _ := os.ReadFile(h.logPath)
		return strings.Count(string(b), "removed a work directory an ended job left")
	}
	wait.For(t, 10*time.Second, "a line in the agent's log per directory removed", func() bool { return removed() >= len(left) })
	for _, dir := range left {
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", dir, err)
		}
	}
	if n := removed(); n != len(left) {
		t.Errorf("the agent logged %d removals, want %d", n, len(left))
	}
}

// TestIdleStaticAgentReturnsHeapAfterAJob: once a job has ended and no
// other came for IdleTrimAfter, the agent hands its free heap back (its
// debug log says so, once per idle spell); a job that follows within that
// time puts the trim off until after it.
func TestIdleStaticAgentReturnsHeapAfterAJob(t *testing.T) {
	const trimAfter = 2 * time.Second
	h := startAgentWith(t, agenttest.Options{}, nil, trimAfter)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	trims := func() int {
		b, _ := os.ReadFile(h.logPath)
		return strings.Count(string(b), "returned free heap to the operating system")
	}
	job := func(id, run string) {
		h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: id}, lockfile.Job{Name: "j", Checkout: ptr(false), Steps: []lockfile.Step{{Name: "s", Run: run}}})
	}
	job("j1", "echo hi")
	h.srv.WaitJobTerminal(t, "j1", 10*time.Second)
	if !wait.Until(10*time.Second, func() bool { return trims() == 1 }) {
		t.Fatalf("after the first job: %d trims logged, want 1", trims())
	}
	// Back to back: j3 is dispatched as soon as j2 ends, well within
	// trimAfter, and runs past it, so no trim may come between them.
	job("j2", "echo hi")
	h.srv.WaitJobTerminal(t, "j2", 10*time.Second)
	job("j3", "sleep 3")
	h.srv.WaitJobTerminal(t, "j3", 20*time.Second)
	if n := trims(); n != 1 {
		t.Fatalf("a job followed within %v: %d trims logged by the end of the next one, want still 1", trimAfter, n)
	}
	if !wait.Until(10*time.Second, func() bool { return trims() == 2 }) {
		t.Fatalf("idle after the last job: %d trims logged, want 2", trims())
	}
}

func TestAgentAuthFailureStops(t *testing.T) {
	h := startAgent(t, agenttest.Options{Token: "kat_right"}, func(c *Config) { c.Token = "kat_wrong" })
	err := h.wait(t, 10*time.Second)
	if !errors.Is(err, conn.ErrAuthFailed) || !strings.Contains(err.Error(), "Invalid token") {
		t.Fatalf("err = %v", err)
	}
	wait.Elapse(t.Context(), 200*time.Millisecond) // room for a reconnect that must not come
	if n := h.srv.AuthFailures(); n != 1 {
		t.Errorf("auth attempts = %d, want 1 (no reconnect)", n)
	}
}

func TestAgentTokenAuthAndScalerOneJob(t *testing.T) {
	h := startAgent(t, agenttest.Options{Token: "kat_ok"}, func(c *Config) {
		c.Token = "kat_ok"
		c.ScalerManaged = true
		c.ScalerIdleTimeout = 10 * time.Second
	})
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "one"}, lockfile.Job{Name: "j", Checkout: ptr(false), Steps: []lockfile.Step{{Name: "s", Run: "echo hi"}}})
	if err := h.wait(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	js, _ := h.srv.WaitJobTerminal(t, "one", time.Second)
	if js.State != status.JobSuccess {
		t.Errorf("state %s", js.State)
	}
}

func TestAgentScalerIdleExit(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, func(c *Config) {
		c.ScalerManaged = true
		c.ScalerIdleTimeout = 200 * time.Millisecond
	})
	if err := h.wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestAgentJobTimeoutAndRetry(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	counter := filepath.Join(t.TempDir(), "n")
	job := lockfile.Job{Name: "j", Checkout: ptr(false), Steps: []lockfile.Step{
		{Name: "flaky", Run: "n=$(cat " + counter + " 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + counter + "; echo attempt $n; [ $n -ge 2 ]",
			Retry: &lockfile.Retry{MaxAttempts: 3, DelayMs: 50, Backoff: "exponential", MaxDelayMs: 1000}},
		{Name: "noisy", Run: "for i in $(seq 1 500); do echo line$i; done"},
		{Name: "ts-step"},
	}}
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "jt", MaxLogSizeBytes: 1000}, job)
	js, _ := h.srv.WaitJobTerminal(t, "jt", 20*time.Second)
	final := h.srv.FinalStepStatuses("jt")
	if final[0].State != status.StepSuccess || final[0].Data.Attempt != 2 {
		t.Errorf("flaky step: %+v %+v", final[0], final[0].Data)
	}
	noisy := h.srv.LogText("jt", 1)
	if final[1].State != status.StepSuccess || final[1].LogBytesStreamed > 1000 || final[1].LogBytesStreamed < 900 ||
		!strings.HasSuffix(noisy, "[TRUNCATED: log output exceeded 1000 bytes]\n") || strings.Contains(noisy, "line500") {
		t.Errorf("noisy step: %+v bytes=%d log tail=%q", final[1].State, final[1].LogBytesStreamed, noisy[max(0, len(noisy)-80):])
	}
	if final[2].State != status.StepFailed || final[2].Data.Error != "TypeScript steps need the KiCI Node agent" {
		t.Errorf("ts step: %+v", final[2].Data)
	}
	if js.State != status.JobFailed {
		t.Errorf("job %s", js.State)
	}

	job2 := lockfile.Job{Name: "j2", Checkout: ptr(false), Timeout: 500, Steps: []lockfile.Step{
		{Name: "long", Run: "sleep 20"}, {Name: "next", Run: "true"},
	}}
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "jt2"}, job2)
	js2, _ := h.srv.WaitJobTerminal(t, "jt2", 20*time.Second)
	if js2.State != status.JobFailed || !strings.HasPrefix(js2.Data.Error, "job_timeout:") {
		t.Errorf("job timeout: %+v %+v", js2, js2.Data)
	}
	if f := h.srv.FinalStepStatuses("jt2"); f[1].State != status.StepSkipped {
		t.Errorf("step after job timeout: %s", f[1].State)
	}
}

func TestAgentGracefulShutdownCancelsJob(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "js"}, lockfile.Job{Name: "j", Checkout: ptr(false), Steps: []lockfile.Step{{Name: "s", Run: "sleep 30"}}})
	h.srv.WaitMessage(t, 10*time.Second, "step running", func(r agenttest.Received) bool {
		ss, ok := r.Msg.(*protocol.StepStatus)
		return ok && ss.State == status.StepRunning
	})
	h.cancel()
	if err := h.wait(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	js, _ := h.srv.WaitJobTerminal(t, "js", time.Second)
	if js.State != status.JobCancelled {
		t.Errorf("state %s", js.State)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// jobDirs lists the entries of the agent's work root other than the host's
// mirror cache (kici-mirrors, kept across jobs on purpose).
func jobDirs(root string) []string {
	ents, _ := os.ReadDir(root)
	var out []string
	for _, e := range ents {
		if e.Name() != "kici-mirrors" {
			out = append(out, e.Name())
		}
	}
	return out
}
