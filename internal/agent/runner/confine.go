package runner

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"kici.dev/kici/internal/agent/checkout"
)

// confine prepares the job's work directory for its steps before anything
// runs: it refuses an untrusted job on an agent that cannot keep steps away
// from its host (Options.RefuseUntrusted), takes the job's uid (a fresh one
// from Options.UIDs, else Options.StepUser) into j.ident, and when steps run
// as a step user it makes the work root traversable and hands the job
// directory (but not the checkout yet) to that user. The checkout, the
// job's HOME and each step script are handed over as they are written
// (handOver).
func (j *job) confine() error {
	r := j.r
	if j.d.Untrusted && r.opts.RefuseUntrusted != "" {
		return errors.New("refusing an untrusted job (fork pull request): " + r.opts.RefuseUntrusted)
	}
	u := r.opts.StepUser
	if r.opts.UIDs != nil {
		got, release, err := r.opts.UIDs.Acquire()
		if err != nil {
			return errors.New("job uid: " + err.Error())
		}
		u, j.ident.release = got, release
	}
	j.ident.User = u
	if u == nil {
		return nil
	}
	if err := traversable(r.opts.WorkRoot); err != nil {
		return errors.New("work directory: " + err.Error())
	}
	// The checkout directory stays root's until the checkout is done: git
	// refuses to work in a repository another user owns. The job's HOME
	// (setupHome) is handed over with it, after caches are restored.
	if err := os.Lchown(j.workDir, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("hand %s to the step user: %w", j.workDir, err)
	}
	return u.handOver(j.tmpDir, j.scripts)
}

// handOverCheckout gives the checkout (and a per-job home) to the step
// user once the agent has finished the checkout — git refuses to check out
// into a directory another user owns — and before caches and artifacts are
// unpacked into them as that user.
func (j *job) handOverCheckout() error {
	u := j.ident.User
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
	if u := j.ident.User; u != nil {
		return u.handOver(paths...)
	}
	return nil
}

// userEnv sets USER to the step user's name in extra (a step's
// agent-chosen variables); unchanged without a named step user.
func (j *job) userEnv(extra map[string]string) map[string]string {
	if u := j.ident.User; u != nil {
		name := u.Name
		if name == "" {
			name = strconv.Itoa(int(u.UID)) // a job's own uid has no account
		}
		extra["USER"] = name
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
