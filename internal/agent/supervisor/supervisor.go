// Package supervisor is the step supervisor: the small process each step's
// shell runs under, so nothing the step starts outlives the step or the
// agent. It has no dependency beyond the standard library because it
// starts once per step: the separate kici-step-supervisor binary (about a
// fifth of the agent's start-up cost) runs it, and kici-agent re-executed
// with Arg runs it where that binary is missing.
package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Arg is the first argument that makes kici-agent run as a step supervisor
// instead of an agent. It is not a user-facing command; the
// kici-step-supervisor binary accepts and ignores it.
const Arg = "__kici-step-supervisor"

// BinaryName is the supervisor's own binary, looked for beside kici-agent.
const BinaryName = "kici-step-supervisor"

// SignalExitBase is added to a signal number to form the exit code of a
// process the signal ended (the shell's convention: 128+n).
const SignalExitBase = 128

// Why a supervisor. A step's shell runs in its own process group, and the
// kernel SIGKILLs the shell when the agent dies (PR_SET_PDEATHSIG); but the
// processes the shell started — a `sleep 300`, a deploy script — would
// outlive a SIGKILLed agent and keep acting after kici reported the job
// failed. So each step runs under this supervisor:
//
//   - the supervisor leads the step's process group and is a child
//     subreaper (PR_SET_CHILD_SUBREAPER), so every process the step starts
//     stays its descendant, even one that double-forks or calls setsid;
//   - it holds the read end of a lifeline pipe whose write end only the
//     agent holds; when the agent dies for any reason the pipe reports end
//     of file and the supervisor SIGKILLs all its descendants and the group;
//   - when the step's shell exits it kills whatever the shell left behind
//     the same way, then exits with the shell's status (128+n for a signal);
//   - it ignores nothing: SIGTERM and SIGINT sent to the group reach the
//     shell directly, the supervisor only survives them to finish the job.
//
// Arguments (after the prefix, see Argv): the view flags (view.go), uid, gid
// ("-" to keep the supervisor's own), "--", then the step's argv. The
// lifeline is descriptor 3.

// Argv returns the command line that runs argv under the supervisor
// prefix (e.g. [kici-step-supervisor] or [kici-agent, Arg], with namespace
// flags), as uid/gid when cred is set.
func Argv(prefix []string, cred *syscall.Credential, argv []string) []string {
	uid, gid := "-", "-"
	if cred != nil {
		uid, gid = strconv.Itoa(int(cred.Uid)), strconv.Itoa(int(cred.Gid))
	}
	out := append(append([]string{}, prefix...), uid, gid, "--")
	return append(out, argv...)
}

// Credential is a step process's credential: uid and gid with no
// supplementary groups (the agent's must not leak to the step).
func Credential(uid, gid uint32) *syscall.Credential {
	return &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
}

// Main runs the supervisor with its arguments (os.Args[1:], an optional
// leading Arg) and returns the process's exit code: the step's, 128+n when
// a signal ended it, 127 when it could not start.
func Main(args []string) int {
	if len(args) > 0 && args[0] == Arg {
		args = args[1:]
	}
	v, args := parseFlags(args)
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "kici step supervisor: usage: uid gid -- argv...")
		return 127
	}
	var cred *syscall.Credential
	if args[0] != "-" {
		uid, err1 := strconv.ParseUint(args[0], 10, 32)
		gid, err2 := strconv.ParseUint(args[1], 10, 32)
		if err1 != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, "kici step supervisor: bad uid/gid")
			return 127
		}
		cred = Credential(uint32(uid), uint32(gid))
	}
	argv := args[3:]
	lifeline := os.NewFile(3, "lifeline")
	syscall.CloseOnExec(3)
	becomeSubreaper()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs { // the shell got the same signal; it decides
		}
	}()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	SetDeathSignal(cmd.SysProcAttr)
	if v.enabled() {
		if err := enterView(v); err != nil {
			fmt.Fprintf(os.Stderr, "kici step supervisor: %v\n", err)
			return 127
		}
	}
	if v.userns {
		setStepUserNamespace(cmd.SysProcAttr, hostID("/proc/self/uid_map"), hostID("/proc/self/gid_map"))
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "could not start step: %v\n", err)
		return 127
	}
	// Once the lifeline is lost, its goroutine owns the exit: its reaping
	// can take the shell's status from cmd.Wait, which must not then end
	// the process with a "could not wait" 127 before the group is killed.
	var lost atomic.Bool
	if lifeline != nil {
		go func() {
			_, _ = io.Copy(io.Discard, lifeline)
			// The agent is gone: nothing of the step may outlive it.
			lost.Store(true)
			killDescendants()
			_ = syscall.Kill(0, syscall.SIGKILL)
			os.Exit(SignalExitBase + int(syscall.SIGKILL))
		}()
	}
	err := cmd.Wait()
	if lost.Load() {
		select {} // the lifeline goroutine is killing the group and exits
	}
	killDescendants()
	if cmd.ProcessState == nil {
		fmt.Fprintf(os.Stderr, "step: %v\n", err)
		return 127
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return SignalExitBase + int(ws.Signal())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintf(os.Stderr, "step: %v\n", err)
		return 127
	}
	return cmd.ProcessState.ExitCode()
}

// killDescendants SIGKILLs every live descendant of this process until none
// is left (bounded to 5 s: a step cannot out-fork it for long, since
// orphans are re-parented to the subreaper), reaping them as it goes.
func killDescendants() {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := descendants(os.Getpid())
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		reapAll()
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reapAll collects every exited child without blocking.
func reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
