package runner

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
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
// namespaces with hide covered (absolute paths; missing ones are skipped)
// and shared kept writable.
func NamespacedSupervisor(prefix, hide, shared []string) []string {
	return withView(prefix, supervisor.NamespacesFlag, hide, shared)
}

// SandboxedSupervisor returns the supervisor prefix of a root agent
// extended so each step runs in its own mount, PID and IPC namespaces
// (no user namespace: the supervisor stays root until it starts the step
// as the job's uid) with hide covered (absolute paths; missing ones are
// skipped) and shared kept writable (KICI_STEP_SHARED_PATHS). Each job adds
// its own view (viewFlags).
func SandboxedSupervisor(prefix, hide, shared []string) []string {
	return withView(prefix, supervisor.SandboxFlag, hide, shared)
}

func withView(prefix []string, mode string, hide, shared []string) []string {
	out := append(append([]string{}, prefix...), mode)
	for _, p := range hide {
		out = append(out, supervisor.HideFlag+p)
	}
	for _, p := range shared {
		out = append(out, supervisor.BindFlag+p)
	}
	return out
}

// namespaced reports whether a supervisor prefix asks for namespaces.
func namespaced(prefix []string) bool {
	return slices.Contains(prefix, supervisor.NamespacesFlag)
}

// sandboxed reports whether a supervisor prefix asks for a root sandbox.
func sandboxed(prefix []string) bool {
	return slices.Contains(prefix, supervisor.SandboxFlag)
}

// setViewNamespaces sets the namespaces a supervisor prefix asks for.
func setViewNamespaces(prefix []string, a *syscall.SysProcAttr) {
	switch {
	case namespaced(prefix):
		setSupervisorNamespaces(a)
	case sandboxed(prefix):
		a.Cloneflags |= syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
	}
}

// setSupervisorNamespaces makes the supervisor start in new user, mount
// and PID namespaces, as 0 inside (mapped to this process's ids).
func setSupervisorNamespaces(a *syscall.SysProcAttr) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
	a.UidMappings = supervisor.HostIDMap(0, os.Getuid())
	a.GidMappings = supervisor.HostIDMap(0, os.Getgid())
	a.GidMappingsEnableSetgroups = false
}

// ProbeNamespaces runs `true` under the namespaced or sandboxed supervisor
// prefix (see NamespacedSupervisor, SandboxedSupervisor) with a job's view
// (a work directory under the temp dir bound back through a covered /tmp)
// and reports why steps cannot be confined that way here (nil: they can).
// Kernels or containers that forbid unprivileged user namespaces, mounts
// (no CAP_SYS_ADMIN) or a fresh /proc fail it.
//
// On success the process is left dumpable: a non-dumpable process's
// children start with /proc files owned by root, so it could not write
// their uid and gid maps. That costs no secrecy from steps: in their PID
// namespace the agent has no pid, so neither its /proc/<pid>/environ nor
// ptrace reaches it. On failure the dumpable flag is restored.
func ProbeNamespaces(prefix []string) (err error) {
	if namespaced(prefix) { // a root agent needs no uid maps: it stays non-dumpable
		wasDumpable, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0); e != 0 {
			return e
		}
		defer func() {
			if err != nil {
				_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, wasDumpable, 0)
			}
		}()
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	work, err := os.MkdirTemp("", "kici-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	view := append(append([]string{}, prefix...), supervisor.TmpfsFlag+"/tmp", supervisor.HideFlag+os.TempDir(), supervisor.BindFlag+work)
	argv := supervisor.Argv(view, nil, []string{"/bin/sh", "-c", `test -d "$1"`, "sh", work})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{r}
	cmd.Dir = work // as a step's: in its work directory, which the view keeps
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setViewNamespaces(prefix, cmd.SysProcAttr)
	out, err := cmd.CombinedOutput()
	r.Close()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
