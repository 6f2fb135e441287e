package supervisor

import "strings"

// Flags of the supervisor prefix that give a step its own view of the host
// (see view_linux.go). The agent puts them before the uid and gid
// arguments; the agent-wide ones (NamespacesFlag or SandboxFlag, the
// KICI_AGENT_HIDE_PATHS entries) come with its Options.Supervisor, the
// per-job ones (the job's work directory, the work root to hide) with each
// step.
const (
	// NamespacesFlag: the supervisor was started in new user, mount and
	// PID namespaces by an agent that is not root (the step then runs in a
	// nested user namespace as the agent's uid).
	NamespacesFlag = "--kici-namespaces"
	// SandboxFlag: the supervisor was started as root in new mount, PID
	// and IPC namespaces (no user namespace); it switches to the step's
	// uid and gid only when it starts the step, after the view is built.
	SandboxFlag = "--kici-sandbox"
	// HideFlag names a path covered by an empty read-only directory (a
	// file: by /dev/null).
	HideFlag = "--kici-hide="
	// TmpfsFlag names a directory replaced by a fresh, empty, writable
	// tmpfs (mode 1777): /tmp, /var/tmp, /dev/shm.
	TmpfsFlag = "--kici-tmpfs="
	// BindFlag names a path kept visible and writable at the same place
	// although a hidden path or a tmpfs covers it (the job's work
	// directory, its attestation socket directory).
	BindFlag = "--kici-bind="
	// ROBindFlag is BindFlag read-only (the agent's binary, which steps
	// run as `kici-agent attest`).
	ROBindFlag = "--kici-robind="
)

// view is what the supervisor builds before it starts the step.
type view struct {
	userns, sandbox bool
	hide, tmpfs     []string
	bind, robind    []string
}

// enabled reports whether the supervisor runs in namespaces of its own.
func (v *view) enabled() bool { return v.userns || v.sandbox }

// parseFlags splits the leading view flags off args.
func parseFlags(args []string) (v view, rest []string) {
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == NamespacesFlag:
			v.userns = true
		case a == SandboxFlag:
			v.sandbox = true
		case strings.HasPrefix(a, HideFlag):
			v.hide = append(v.hide, strings.TrimPrefix(a, HideFlag))
		case strings.HasPrefix(a, TmpfsFlag):
			v.tmpfs = append(v.tmpfs, strings.TrimPrefix(a, TmpfsFlag))
		case strings.HasPrefix(a, BindFlag):
			v.bind = append(v.bind, strings.TrimPrefix(a, BindFlag))
		case strings.HasPrefix(a, ROBindFlag):
			v.robind = append(v.robind, strings.TrimPrefix(a, ROBindFlag))
		default:
			return v, args
		}
		args = args[1:]
	}
	return v, args
}
