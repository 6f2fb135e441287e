package runner

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"kici.dev/kici/internal/agent/supervisor"
)

// Namespaces (why: see package supervisor). The agent starts the
// supervisor in new user, mount and PID namespaces; the supervisor hides
// paths, mounts a fresh /proc and starts the step in a nested user
// namespace.

// NamespacedSupervisor returns the supervisor prefix (e.g. [kici-agent,
// SupervisorArg]) extended so each step runs in its own user, mount and PID
// namespaces with hide covered (absolute paths; missing ones are skipped).
func NamespacedSupervisor(prefix []string, hide []string) []string {
	out := append(append([]string{}, prefix...), supervisor.NamespacesFlag)
	for _, p := range hide {
		out = append(out, supervisor.HideFlag+p)
	}
	return out
}

// namespaced reports whether a supervisor prefix asks for namespaces.
func namespaced(prefix []string) bool {
	for _, a := range prefix {
		if a == supervisor.NamespacesFlag {
			return true
		}
	}
	return false
}

// setSupervisorNamespaces makes the supervisor start in new user, mount
// and PID namespaces, as 0 inside (mapped to this process's ids).
func setSupervisorNamespaces(a *syscall.SysProcAttr) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
	a.UidMappings = supervisor.HostIDMap(0, os.Getuid())
	a.GidMappings = supervisor.HostIDMap(0, os.Getgid())
	a.GidMappingsEnableSetgroups = false
}

// ProbeNamespaces runs `true` under the namespaced supervisor prefix (see
// NamespacedSupervisor) and reports why steps cannot be confined that way
// here (nil: they can). Kernels or containers that forbid unprivileged user
// namespaces, or a fresh /proc in them, fail it.
//
// On success the process is left dumpable: a non-dumpable process's
// children start with /proc files owned by root, so it could not write
// their uid and gid maps. That costs no secrecy from steps: in their PID
// namespace the agent has no pid, so neither its /proc/<pid>/environ nor
// ptrace reaches it. On failure the dumpable flag is restored.
func ProbeNamespaces(prefix []string) (err error) {
	wasDumpable, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0); e != 0 {
		return e
	}
	defer func() {
		if err != nil {
			_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, wasDumpable, 0)
		}
	}()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	argv := supervisor.Argv(prefix, nil, []string{"/bin/sh", "-c", "exit 0"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setSupervisorNamespaces(cmd.SysProcAttr)
	out, err := cmd.CombinedOutput()
	r.Close()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
