package supervisor

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// becomeSubreaper makes orphaned descendants re-parent to this process
// instead of init, so they stay within reach of killDescendants.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// SetDeathSignal makes the kernel SIGKILL a process started with a when
// its parent dies (e.g. kill -9 of the agent), so a lost agent does not
// leave a step's shell running on the host.
func SetDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
