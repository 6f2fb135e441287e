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

// TryNamespaces confines the steps of an agent that runs them as its own
// user (not root) with user, mount and PID namespaces when the kernel
// allows it (probed once, here): each step then sees the paths of
// KICI_AGENT_HIDE_PATHS as empty read-only directories and a /proc of its
// own processes only, and untrusted jobs are no longer refused. It returns
// the supervisor prefix to run steps with (supervisor unchanged when the
// namespaces are not used; c then keeps its warning, with the reason).
// A relative hide path is an error.
func (c *Confinement) TryNamespaces(supervisor []string, environ []string) ([]string, error) {
	if c.StepUser != nil || len(supervisor) == 0 || !strings.HasPrefix(c.Summary, "steps run as the agent's own user") {
		return supervisor, nil
	}
	var hide []string
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, EnvHidePaths+"=")
		if !ok {
			continue
		}
		for _, p := range strings.Split(v, ":") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if !filepath.IsAbs(p) {
				return nil, fmt.Errorf("%s: %q is not an absolute path", EnvHidePaths, p)
			}
			hide = append(hide, filepath.Clean(p))
		}
	}
	if len(hide) == 0 {
		c.Summary += "; set " + EnvHidePaths + " to the orchestrator's data directory to hide it with a mount namespace"
		return supervisor, nil
	}
	ns := runner.NamespacedSupervisor(supervisor, hide)
	if err := runner.ProbeNamespaces(ns); err != nil {
		c.Summary += "; this host does not let it hide " + strings.Join(hide, ", ") + " with namespaces (" + err.Error() + ")"
		return supervisor, nil
	}
	c.Loud, c.RefuseUntrusted = false, ""
	c.Summary = "steps run as the agent's own user in their own user, mount and PID namespaces: " +
		strings.Join(hide, ", ") + " appear empty and read-only, /proc shows only the step's processes"
	return ns, nil
}
