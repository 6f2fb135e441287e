package runner

import (
	"os"
	"path/filepath"

	"kici.dev/kici/internal/agent/supervisor"
)

// Identity is who one job's steps run as and where their own state lives.
// It is the one place code that must act as the job — the step runner, the
// cache and artifact code — takes the job's credentials and paths from. The
// runner fills it in confine and frees it once the job's work directory is
// gone.
type Identity struct {
	// User is the job's uid and gid; nil when steps run as the agent's own
	// user. On a root agent with Options.UIDs it is a uid of the job's
	// own that no other live job of the host has.
	User *StepUser
	// Home is the job's HOME, <work>/home: created empty for the job (in
	// its private work directory, before any of its processes exist) and
	// removed with it; "" when steps share the agent's HOME (an unconfined
	// agent without KICI_AGENT_JOB_HOME).
	Home string
	// Tmp is the job's TMPDIR, <work>/tmp, kept across its steps. In a
	// sandbox /tmp itself is a fresh, empty tmpfs for each step.
	Tmp string

	release func()
}

// free gives the job's uid back to the pool (once).
func (id *Identity) free() {
	if id.release != nil {
		id.release()
		id.release = nil
	}
}

// confined reports whether the agent runs steps as another user than its
// own (a fixed step user or a uid per job).
func (r *Runner) confined() bool {
	return r.opts.StepUser != nil || r.opts.UIDs != nil
}

// viewFlags are the supervisor flags that give this job's steps their own
// view (supervisor/view_linux.go): fresh /tmp, /var/tmp and /dev/shm; the
// work root (every job's work directory and HOME, the checkout mirrors) and
// the agent's temp directory (other jobs' attestation sockets) hidden; this
// job's work directory and attestation socket bound back, and the agent's
// binary read-only for `kici-agent attest`. None without namespaces.
func (j *job) viewFlags() []string {
	sup := j.r.opts.Supervisor
	if !namespaced(sup) && !sandboxed(sup) {
		return nil
	}
	if j.view != nil {
		return j.view
	}
	v := []string{
		supervisor.TmpfsFlag + "/tmp", supervisor.TmpfsFlag + "/var/tmp", supervisor.TmpfsFlag + "/dev/shm",
		supervisor.HideFlag + canonical(j.r.opts.WorkRoot), supervisor.HideFlag + canonical(os.TempDir()),
		supervisor.BindFlag + canonical(j.workDir),
	}
	if j.attest != nil {
		v = append(v, supervisor.BindFlag+canonical(j.attest.dir))
	}
	if b := j.r.opts.AgentBinary; b != "" {
		v = append(v, supervisor.ROBindFlag+canonical(b))
	}
	j.view = v
	return v
}

// canonical is p absolute with its symbolic links resolved (p itself when
// that fails): mounts land on resolved paths, and a step sees a path the
// same way through a link.
func canonical(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
