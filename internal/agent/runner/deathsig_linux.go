package runner

import "syscall"

// setDeathSignal makes the kernel SIGKILL a step's shell when the agent
// process dies (e.g. kill -9), so a lost agent does not leave the step
// running on the host. Processes the shell started survive only until
// they next need the shell (a foreground loop ends with it); daemons the
// step detached are outside any agent's reach.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
