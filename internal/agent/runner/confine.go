package runner

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"kici.dev/kici/internal/agent/checkout"
)

// confine prepares the job's work directory for its steps before anything
// runs: it refuses an untrusted job on an agent that cannot keep steps away
// from its host (Options.RefuseUntrusted), and when steps run as a step user
// it makes the work root traversable, hands the job directory (but not the
// checkout yet) to that user and prepares the user's home. The checkout and each step script are
// handed over as they are written (handOver).
func (j *job) confine() error {
	r := j.r
	if j.d.Untrusted && r.opts.RefuseUntrusted != "" {
		return errors.New("refusing an untrusted job (fork pull request): " + r.opts.RefuseUntrusted)
	}
	u := r.opts.StepUser
	if u == nil {
		return nil
	}
	if err := traversable(r.opts.WorkRoot); err != nil {
		return errors.New("work directory: " + err.Error())
	}
	// The checkout directory stays root's until the checkout is done: git
	// refuses to work in a repository another user owns.
	if err := os.Lchown(j.workDir, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("hand %s to the step user: %w", j.workDir, err)
	}
	if err := u.handOver(j.tmpDir, j.scripts); err != nil {
		return err
	}
	if j.ownHome() {
		return nil // the job's own home is handed over with the checkout
	}
	home, err := u.homeDir(r.opts.WorkRoot)
	if err != nil {
		return errors.New("step user home: " + err.Error())
	}
	j.home = home
	// The agent user's HOME and Go cache locations are not the step
	// user's to write: point them at its own home (Go derives its caches
	// from HOME).
	env := make([]string, 0, len(j.hostEnv)+1)
	for _, kv := range j.hostEnv {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "GOPATH", "GOCACHE", "GOMODCACHE", "XDG_CACHE_HOME":
			continue
		}
		env = append(env, kv)
	}
	j.hostEnv = append(env, "HOME="+home)
	return nil
}

// handOverCheckout gives the checkout (and a per-job home) to the step
// user once the agent has finished the checkout — git refuses to check out
// into a directory another user owns — and before caches and artifacts are
// unpacked into them as that user.
func (j *job) handOverCheckout() error {
	u := j.r.opts.StepUser
	if u == nil {
		return nil
	}
	linked, err := j.detachMirror()
	if err != nil {
		return err
	}
	paths := []string{j.srcDir}
	if j.ownHome() {
		paths = append(paths, j.homeDir()) // caches are restored into it
	}
	return u.handOverExcept(linked, paths...)
}

// handOver gives paths to the step user (no-op without one).
func (j *job) handOver(paths ...string) error {
	if u := j.r.opts.StepUser; u != nil {
		return u.handOver(paths...)
	}
	return nil
}

// userEnv sets USER to the step user's name in extra (a step's
// agent-chosen variables); unchanged without a named step user.
func (j *job) userEnv(extra map[string]string) map[string]string {
	if u := j.r.opts.StepUser; u != nil && u.Name != "" {
		extra["USER"] = u.Name
	}
	return extra
}

// detachMirror makes the checkout usable by the step user without the
// host mirror, which is private to the agent's user
// (checkout.Detach), and returns the files it linked from the mirror:
// they must stay the agent user's.
func (j *job) detachMirror() (map[string]bool, error) {
	env := []string{"PATH=" + lookupEnv(j.r.opts.HostEnv, "PATH"), "GIT_CONFIG_NOSYSTEM=1", "HOME=" + j.srcDir}
	return checkout.Detach(j.ctx, j.srcDir, env)
}
