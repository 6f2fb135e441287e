package agent

import (
	"fmt"
	"path/filepath"
	"strings"

	"kici.dev/kici/internal/agent/runner"
)

// EnvHidePaths lists (colon-separated, absolute) paths a non-root agent
// hides from its steps with a mount namespace: the orchestrator's data
// directory on the same host, the agent's own credential files. A spawned
// bare-metal agent gets the orchestrator's data directory here.
const EnvHidePaths = "KICI_AGENT_HIDE_PATHS"

// EnvSharedPaths lists (colon-separated, absolute) host directories every
// job's steps may still read and write in their sandbox, at the same path:
// a drop directory an operator shares on purpose. Everything else of the
// host outside the job's own work directory is read-only or hidden.
const EnvSharedPaths = "KICI_STEP_SHARED_PATHS"

// TryNamespaces gives each step a view of its own where the host allows it
// (probed once, here), and returns the supervisor prefix to run steps with
// (supervisor unchanged when namespaces are not used). As root (StepUser
// or UIDs set) each step gets mount, PID and IPC namespaces (trySandbox);
// where they are missing c says which and refuses untrusted jobs. An agent
// that runs steps as its own user uses user, mount and PID namespaces when
// KICI_AGENT_HIDE_PATHS names what to hide: each step then sees those paths
// as empty read-only directories, no other job's work directory and a
// /proc of its own processes only, and untrusted jobs are no longer
// refused; otherwise c keeps its warning, with the reason. A relative hide
// path is an error.
func (c *Confinement) TryNamespaces(supervisor []string, environ []string) ([]string, error) {
	hide, err := pathList(environ, EnvHidePaths)
	if err != nil {
		return nil, err
	}
	shared, err := pathList(environ, EnvSharedPaths)
	if err != nil {
		return nil, err
	}
	if c.StepUser != nil || c.UIDs != nil {
		return c.trySandbox(supervisor, hide, shared), nil
	}
	if len(supervisor) == 0 || !strings.HasPrefix(c.Summary, "steps run as the agent's own user") {
		return supervisor, nil
	}
	if len(hide) == 0 {
		c.Summary += "; set " + EnvHidePaths + " to the orchestrator's data directory to hide it with a mount namespace"
		return supervisor, nil
	}
	ns := runner.NamespacedSupervisor(supervisor, hide, shared)
	if err := runner.ProbeNamespaces(ns); err != nil {
		c.Summary += "; this host does not let it hide " + strings.Join(hide, ", ") + " with namespaces (" + err.Error() + ")"
		return supervisor, nil
	}
	c.Loud, c.RefuseUntrusted = false, ""
	c.Summary = "steps run as the agent's own user in their own user, mount and PID namespaces: " +
		strings.Join(hide, ", ") + " appear empty and read-only, /proc shows only the step's processes, other jobs' work directories and homes are absent"
	return ns, nil
}

// trySandbox gives each job of a root agent its own mount, PID and IPC
// namespaces (runner.SandboxedSupervisor) when the host allows it (probed
// here). Where it does not — no step supervisor, or no CAP_SYS_ADMIN, as
// in an unprivileged container — the summary says which piece is missing
// and untrusted jobs are refused unless KICI_ALLOW_UNCONFINED_STEPS=true
// (a scaler's container, one job per container, sets it: the container is
// the job's sandbox).
func (c *Confinement) trySandbox(supervisor, hide, shared []string) []string {
	missing := ""
	if len(supervisor) == 0 {
		missing = "no step supervisor, so no PID or mount namespace per job"
	} else {
		sb := runner.SandboxedSupervisor(supervisor, hide, shared)
		err := probeSandbox(c.ProbeNoteDir, sb)
		if err == nil {
			c.Summary += "; each step runs in its own PID, mount and IPC namespaces: it sees only its job's processes, a private /tmp, its own work directory and HOME, the rest of the host read-only, and no other job's work directory or home"
			if len(hide) > 0 {
				c.Summary += " (" + strings.Join(hide, ", ") + " appear empty)"
			}
			if len(shared) > 0 {
				c.Summary += "; shared with every job (" + EnvSharedPaths + "): " + strings.Join(shared, ", ")
			}
			return sb
		}
		missing = "this host cannot give each job its own PID and mount namespaces (" + err.Error() + "): a step can list other jobs' processes and reach paths they share"
	}
	c.Loud = true
	c.Summary += "; but " + missing
	if c.allowUnconfined {
		c.Summary += "; untrusted jobs run anyway (" + EnvAllowUnconfined + "=true)"
	} else {
		c.RefuseUntrusted = missing + "; set " + EnvAllowUnconfined + "=true to run untrusted jobs here anyway"
		c.Summary += "; untrusted (fork pull request) jobs are refused"
	}
	return supervisor
}

// pathList reads a colon-separated list of absolute paths named name from
// environ; a relative one is an error.
func pathList(environ []string, name string) ([]string, error) {
	var out []string
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, name+"=")
		if !ok {
			continue
		}
		for _, p := range strings.Split(v, ":") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if !filepath.IsAbs(p) {
				return nil, fmt.Errorf("%s: %q is not an absolute path", name, p)
			}
			out = append(out, filepath.Clean(p))
		}
	}
	return out, nil
}
