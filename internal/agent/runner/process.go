package runner

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"kici.dev/kici/internal/agent/supervisor"
)

// procSpec is one step attempt: a script run by a shell in its own process
// group.
type procSpec struct {
	Argv    []string
	Dir     string
	Env     []string
	Stdout  io.Writer
	Stderr  io.Writer
	Timeout time.Duration // 0 = none
	// TimeoutGrace is the SIGTERM→SIGKILL window after a timeout.
	TimeoutGrace time.Duration
	// Supervisor, when set, is the command prefix that runs Argv under the
	// step supervisor (supervise.go), so the step's processes die with
	// the agent. Empty: the shell is started directly.
	Supervisor []string
	// View are the job's own supervisor view flags (viewFlags): its work
	// directory bound back, the work root hidden.
	View []string
	// User, when set, is the identity the step runs as.
	User *StepUser
}

// stopSignal tells a running process to stop: Stop closes for a graceful
// stop (SIGTERM, Grace, SIGKILL), Force closes for an immediate SIGKILL.
type stopSignal struct {
	Stop  <-chan struct{}
	Force <-chan struct{}
	Grace func() time.Duration
}

type procResult struct {
	ExitCode int
	TimedOut bool
	Stopped  bool
	StartErr error
}

// runProcess runs spec and waits for it. The process gets its own process
// group; timeouts and stops signal the whole group, and whatever is left of
// the group is SIGKILLed once the shell exits, so no step leaves processes
// behind in its group.
func runProcess(spec procSpec, stop stopSignal) procResult {
	argv := spec.Argv
	attr := &syscall.SysProcAttr{Setpgid: true}
	if len(spec.Supervisor) > 0 {
		// The supervisor must outlive the agent to clean up after it: no
		// death signal for it; it holds the lifeline's read end instead.
		var cred *syscall.Credential
		if spec.User != nil {
			cred = spec.User.credential()
		}
		prefix := append(append([]string{}, spec.Supervisor...), spec.View...)
		argv = supervisor.Argv(prefix, cred, spec.Argv)
		setViewNamespaces(spec.Supervisor, attr)
	} else {
		supervisor.SetDeathSignal(attr)
		if spec.User != nil {
			attr.Credential = spec.User.credential()
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	if spec.Stdout == nil || spec.Stderr == nil {
		return procResult{ExitCode: -1, StartErr: errNoWriter}
	}
	outp, errp, err := stepPipes(spec.Stdout, spec.Stderr)
	if err != nil {
		return procResult{ExitCode: -1, StartErr: err}
	}
	cmd.Stdout, cmd.Stderr = outp.w, errp.w
	cmd.SysProcAttr = attr
	var lifeR *os.File
	if len(spec.Supervisor) > 0 {
		r, w, err := os.Pipe()
		if err != nil {
			outp.abort()
			errp.abort()
			return procResult{ExitCode: -1, StartErr: err}
		}
		lifeR = r
		cmd.ExtraFiles = []*os.File{r} // descriptor 3 of the supervisor
		// The agent holds the write end until the step is over; its death
		// closes it, which tells the supervisor to kill the step's tree.
		defer w.Close()
	}
	err = cmd.Start()
	if lifeR != nil {
		lifeR.Close() // only the supervisor keeps the read end
	}
	if err != nil {
		outp.abort()
		errp.abort()
		return procResult{ExitCode: -1, StartErr: err}
	}
	outp.start()
	if errp != outp {
		errp.start()
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var res procResult
	var waitErr error
	terminate := func(grace time.Duration) {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		g := time.NewTimer(grace)
		defer g.Stop()
		select {
		case waitErr = <-done:
			return
		case <-g.C:
		case <-stop.Force:
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		waitErr = <-done
	}
	select {
	case waitErr = <-done:
	case <-timeout:
		res.TimedOut = true
		terminate(spec.TimeoutGrace)
	case <-stop.Stop:
		res.Stopped = true
		terminate(stop.Grace())
	case <-stop.Force:
		res.Stopped = true
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		waitErr = <-done
	}
	// Reap the rest of the group (background jobs the script left running),
	// and wait until it is really gone so the step is reported finished only
	// when none of its processes can still act.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroupGone(pgid, groupGoneWait)
	outp.finish()
	errp.finish()

	res.ExitCode = exitCode(cmd, waitErr)
	return res
}

func exitCode(cmd *exec.Cmd, err error) int {
	ps := cmd.ProcessState
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return supervisor.SignalExitBase + int(ws.Signal())
	}
	if code := ps.ExitCode(); code >= 0 {
		if code == 0 && err != nil && !errors.Is(err, exec.ErrWaitDelay) {
			return -1
		}
		return code
	}
	return -1
}

// groupGoneWait bounds how long a finished step waits for its killed process
// group to disappear.
const groupGoneWait = 2 * time.Second

// waitGroupGone polls until no live (non-zombie) process of group pgid is
// left, or max elapses. Zombies count as gone: they can no longer run, and
// reaping them is their new parent's business.
func waitGroupGone(pgid int, max time.Duration) {
	deadline := time.Now().Add(max)
	for groupHasLiveMember(pgid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupHasLiveMember reports whether a process of group pgid is alive and
// not a zombie (read from /proc; false where /proc is absent).
func groupHasLiveMember(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	found := false
	supervisor.EachLiveProcess(func(_, _, pgrp int) {
		found = found || pgrp == pgid
	})
	return found
}
