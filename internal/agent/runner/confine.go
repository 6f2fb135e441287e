package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// handOverCheckout gives the checkout (and a per-job home, where caches
// were restored) to the step user once the agent has finished writing them:
// git refuses to check out into a directory another user owns.
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
	if j.ownHome() || len(j.cfg.Cache) > 0 {
		paths = append(paths, j.homeDir()) // restored caches may be there
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

// detachMirror makes a checkout that borrows objects from the host's mirror
// cache (objects/info/alternates; the cache is private to the agent's user)
// self-contained, so that git works for the step user, and returns the
// files it linked from the mirror (which must stay the agent user's).
//
// When the mirror keeps every object in packs (it fetches with
// fetch.unpackLimit=1), its pack files are hard-linked into the checkout:
// git writes them read-only, so the step user can read but not change them,
// and a link costs nothing whatever the repository's size. A mirror with
// loose objects (one filled before it kept packs), or one on another file
// system, has the objects the checkout needs packed into it instead
// (git repack -a -d: one more git process, and work that grows with the
// repository).
func (j *job) detachMirror() (map[string]bool, error) {
	alt := filepath.Join(j.srcDir, ".git", "objects", "info", "alternates")
	b, err := os.ReadFile(alt)
	if err != nil {
		return nil, nil
	}
	mirrorObjects := strings.TrimSpace(string(b))
	if linked, ok := linkMirrorPacks(mirrorObjects, filepath.Join(j.srcDir, ".git", "objects", "pack")); ok {
		return linked, os.Remove(alt)
	}
	cmd := exec.CommandContext(j.ctx, "git", "-C", j.srcDir, "repack", "-a", "-d", "-q")
	cmd.Env = []string{"PATH=" + lookupEnv(j.r.opts.HostEnv, "PATH"), "GIT_CONFIG_NOSYSTEM=1", "HOME=" + j.srcDir}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("checkout: copy the mirror's objects for the step user: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil, os.Remove(alt)
}

// linkMirrorPacks hard-links every pack file of the mirror's object store
// into packDir and returns the links, or ok false (having removed any link
// it made) when the store holds loose objects or a link fails.
func linkMirrorPacks(mirrorObjects, packDir string) (map[string]bool, bool) {
	entries, err := os.ReadDir(mirrorObjects)
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		if n := e.Name(); len(n) == 2 && e.IsDir() && isHex(n) {
			return nil, false // loose objects: only a repack gathers them
		}
	}
	packs, err := os.ReadDir(filepath.Join(mirrorObjects, "pack"))
	if err != nil {
		return nil, false
	}
	linked := map[string]bool{}
	for _, e := range packs {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "pack-") {
			continue // git's temporary files while a fetch writes a pack
		}
		dst := filepath.Join(packDir, name)
		info, err := e.Info()
		if err == nil && info.Mode().Perm()&0o004 == 0 {
			err = errors.New("not readable by other users") // the agent's umask
		}
		if err == nil {
			err = os.Link(filepath.Join(mirrorObjects, "pack", name), dst)
		}
		if err != nil {
			for l := range linked {
				_ = os.Remove(l)
			}
			return nil, false
		}
		linked[dst] = true
	}
	return linked, true
}

// isHex reports whether s is made of lowercase hexadecimal digits.
func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
