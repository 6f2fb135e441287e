package checkout

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Detach makes the work tree in dir, checked out from the host mirror
// (its objects/info/alternates borrows the mirror's objects), self-contained,
// so that git works for a user who cannot read the mirror (the step user:
// the mirror is private to the agent's user). It returns the files it
// linked from the mirror, which the caller must leave the agent user's; a
// work tree that borrows nothing is left as it is. env is the environment
// of the git process it may run.
//
// When the mirror keeps every object in packs (it fetches with
// fetch.unpackLimit=1), its pack files are hard-linked into the checkout:
// git writes them read-only, so the step user can read but not change them,
// and a link costs nothing whatever the repository's size. A mirror with
// loose objects (one filled before it kept packs), or one on another file
// system, has the objects the checkout needs packed into it instead
// (git repack -a -d: one more git process, and work that grows with the
// repository).
func Detach(ctx context.Context, dir string, env []string) (map[string]bool, error) {
	alt := filepath.Join(dir, ".git", "objects", "info", "alternates")
	b, err := os.ReadFile(alt)
	if err != nil {
		return nil, nil
	}
	mirrorObjects := strings.TrimSpace(string(b))
	if linked, ok := linkMirrorPacks(mirrorObjects, filepath.Join(dir, ".git", "objects", "pack")); ok {
		return linked, os.Remove(alt)
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "repack", "-a", "-d", "-q")
	cmd.Env = env
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
		if n := e.Name(); len(n) == 2 && e.IsDir() && isHexByte(n) {
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

// isHexByte reports whether s is a byte in hexadecimal: the name of a
// loose-object directory.
func isHexByte(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
