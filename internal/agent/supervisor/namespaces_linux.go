package supervisor

import (
	"fmt"
	"os"
	"syscall"
)

// Why namespaces. An agent that is not root runs its steps as its own user,
// so file permissions cannot keep a step away from what that user owns: an
// orchestrator data directory on the same host, its /proc/<pid>/environ. So
// where the kernel lets an unprivileged user create namespaces, the step
// supervisor starts in a new user namespace (the agent's uid and gid mapped
// to 0 there, which only gives it capabilities over its own namespaces), a
// new mount namespace and a new PID namespace (the agent sets those up, see
// runner.NamespacedSupervisor). Before starting the step it makes every
// mount private, covers each hidden path with an empty read-only tmpfs (a
// file with /dev/null) and mounts a fresh /proc that shows only the step's
// own processes. The step itself then runs in a nested user namespace that
// maps the agent's uid and gid to themselves, so after exec it holds no
// capability: it cannot unmount what hides the paths (mounts inherited from
// a more privileged namespace are locked anyway).

// HostIDMap maps id (of the creating namespace) to inner.
func HostIDMap(inner, id int) []syscall.SysProcIDMap {
	return []syscall.SysProcIDMap{{ContainerID: inner, HostID: id, Size: 1}}
}

// setStepUserNamespace makes the step start in a nested user namespace
// where it is hostUID/hostGID again (they are 0 in the supervisor's), so it
// keeps no capability after exec.
func setStepUserNamespace(a *syscall.SysProcAttr, hostUID, hostGID int) {
	a.Cloneflags |= syscall.CLONE_NEWUSER
	a.UidMappings = HostIDMap(hostUID, 0)
	a.GidMappings = HostIDMap(hostGID, 0)
	a.GidMappingsEnableSetgroups = false
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
