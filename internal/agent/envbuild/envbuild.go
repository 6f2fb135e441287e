// Package envbuild builds a step's environment from scratch
// (see docs/kici-compatibility.md#agent): nothing from the agent's own
// environment reaches a step unless it is on the allowlist.
package envbuild

import (
	"sort"
	"strings"
)

// HostAllowlist names the agent-process variables copied into every step.
//
// The first group is KiCI's POSIX allowlist. The Go group (GOPATH, GOCACHE,
// GOMODCACHE, GOFLAGS, GOPROXY, GOTOOLCHAIN) is a kici addition: without it a
// `go build` step would fall back to $HOME defaults or the public proxy, so
// steps on a host configured for an offline or mirrored module proxy would
// fail, and every job would rebuild the whole module and build cache instead
// of sharing the host's. These carry locations and policy, never credentials.
var HostAllowlist = []string{
	"PATH", "HOME", "USER", "SHELL", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
	"GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN",
}

// AgentConfigVars are the agent's own configuration variables. They are
// never passed to a step, from any layer: KICI_AGENT_TOKEN is a credential,
// and the others describe the agent, not the job.
var AgentConfigVars = []string{
	"KICI_ORCHESTRATOR_URL", "KICI_AGENT_ID", "KICI_AGENT_TOKEN", "KICI_AGENT_TOKEN_FD", "KICI_LABELS",
	"KICI_MAX_LOG_SIZE_BYTES", "KICI_DEFAULT_STEP_TIMEOUT_MS",
	"KICI_JOB_HEARTBEAT_INTERVAL_MS", "KICI_SCALER_MANAGED",
	"KICI_SCALER_IDLE_TIMEOUT", "KICI_SCALER_PENDING_DISPATCH_TIMEOUT",
	"KICI_WORK_DIR", "KICI_LOG_LEVEL",
}

// WorkspaceVar names the checkout directory for steps.
const WorkspaceVar = "KICI_WORKSPACE"

// Layers are the inputs of Build, lowest precedence first.
type Layers struct {
	// Host is the agent's environment ("K=V" entries, as os.Environ);
	// only HostAllowlist names are kept.
	Host []string
	// Dispatch is JobDispatch.Env: the orchestrator's KICI_* job variables.
	Dispatch map[string]string
	// Context is JobDispatch.ContextVars: the merged variables of the
	// job's contexts (KiCI order: after KICI_* vars, before job env).
	Context map[string]string
	// Workspace is the checkout directory, exported as KICI_WORKSPACE.
	Workspace string
	// Extra holds agent-chosen per-job values (e.g. TMPDIR) applied after
	// the workspace and before the job env.
	Extra map[string]string
	// Job is the lock file's job env.
	Job map[string]string
	// Step is the lock file's step env (highest precedence).
	Step map[string]string
}

// Build merges the layers (later wins) and returns sorted "K=V" entries.
// Names in AgentConfigVars and empty or malformed names (containing '=' or
// NUL) are dropped from every layer.
func Build(l Layers) []string {
	env := map[string]string{}
	allowed := map[string]bool{}
	for _, k := range HostAllowlist {
		allowed[k] = true
	}
	for _, kv := range l.Host {
		k, v, ok := strings.Cut(kv, "=")
		if ok && allowed[k] {
			env[k] = v
		}
	}
	put := func(m map[string]string) {
		for k, v := range m {
			env[k] = v
		}
	}
	put(l.Dispatch)
	put(l.Context)
	if l.Workspace != "" {
		env[WorkspaceVar] = l.Workspace
	}
	put(l.Extra)
	put(l.Job)
	put(l.Step)
	for _, k := range AgentConfigVars {
		delete(env, k)
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			continue
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
