package runner

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Why namespaces. An agent that is not root runs its steps as its own user,
// so file permissions cannot keep a step away from what that user owns: an
// orchestrator data directory on the same host, its /proc/<pid>/environ. So
// where the kernel lets an unprivileged user create namespaces, the step
// supervisor starts in a new user namespace (the agent's uid and gid mapped
// to 0 there, which only gives it capabilities over its own namespaces), a
// new mount namespace and a new PID namespace. Before starting the step it
// makes every mount private, covers each hidden path with an empty
// read-only tmpfs (a file with /dev/null) and mounts a fresh /proc that
// shows only the step's own processes. The step itself then runs in a
// nested user namespace that maps the agent's uid and gid to themselves, so
// after exec it holds no capability: it cannot unmount what hides the paths
// (mounts inherited from a more privileged namespace are locked anyway).

// nsFlag in the supervisor prefix asks for the namespaces; hideFlag names
// one path to hide.
const (
	nsFlag   = "--kici-namespaces"
	hideFlag = "--kici-hide="
)

// NamespacedSupervisor returns the supervisor prefix (e.g. [kici-agent,
// SupervisorArg]) extended so each step runs in its own user, mount and PID
// namespaces with hide covered (absolute paths; missing ones are skipped).
func NamespacedSupervisor(prefix []string, hide []string) []string {
	out := append(append([]string{}, prefix...), nsFlag)
	for _, p := range hide {
		out = append(out, hideFlag+p)
	}
	return out
}

// namespaced reports whether a supervisor prefix asks for namespaces.
func namespaced(prefix []string) bool {
	for _, a := range prefix {
		if a == nsFlag {
			return true
		}
	}
	return false
}

// hostIDMap maps id (of the creating namespace) to inner.
func hostIDMap(inner, id int) []syscall.SysProcIDMap {
	return []syscall.SysProcIDMap{{ContainerID: inner, HostID: id, Size: 1}}
}

// setSupervisorNamespaces makes the supervisor start in new user, mount
// and PID namespaces, as 0 inside (mapped to this process's ids).
func setSupervisorNamespaces(a *syscall.SysProcAttr) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
	a.UidMappings = hostIDMap(0, os.Getuid())
	a.GidMappings = hostIDMap(0, os.Getgid())
	a.GidMappingsEnableSetgroups = false
}

// setStepUserNamespace makes the step start in a nested user namespace
// where it is hostUID/hostGID again (they are 0 in the supervisor's), so it
// keeps no capability after exec.
func setStepUserNamespace(a *syscall.SysProcAttr, hostUID, hostGID int) {
	a.Cloneflags |= syscall.CLONE_NEWUSER
	a.UidMappings = hostIDMap(hostUID, 0)
	a.GidMappings = hostIDMap(hostGID, 0)
	a.GidMappingsEnableSetgroups = false
}

// parseSupervisorFlags splits the leading namespace flags off args.
func parseSupervisorFlags(args []string) (ns bool, hide []string, rest []string) {
	for len(args) > 0 {
		switch {
		case args[0] == nsFlag:
			ns = true
		case strings.HasPrefix(args[0], hideFlag):
			hide = append(hide, strings.TrimPrefix(args[0], hideFlag))
		default:
			return ns, hide, args
		}
		args = args[1:]
	}
	return ns, hide, args
}

// enterNamespaces runs in the supervisor (PID 1 of its PID namespace):
// private mounts, hide covered, a fresh /proc.
func enterNamespaces(hide []string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	for _, p := range hide {
		fi, err := os.Stat(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
		if fi.IsDir() {
			err = syscall.Mount("tmpfs", p, "tmpfs", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size=4k,mode=0555")
		} else {
			err = syscall.Mount("/dev/null", p, "", syscall.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount a fresh /proc: %w", err)
	}
	return nil
}

// hostID returns the id of the creating namespace that 0 maps to in an
// id map file (/proc/self/uid_map); 0 when it cannot be read.
func hostID(mapFile string) int {
	b, err := os.ReadFile(mapFile)
	if err != nil {
		return 0
	}
	var inner, outer, n int
	if _, err := fmt.Sscan(string(b), &inner, &outer, &n); err != nil || inner != 0 {
		return 0
	}
	return outer
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
	argv := supervisorArgv(prefix, nil, []string{"/bin/sh", "-c", "exit 0"})
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
