package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"kici.dev/kici/internal/lockfile"
)

// loadFreshLock returns the lock `kici preview` and `kici run local` use
// for the workflow tree at root ("" = `kici preview`: the repository around
// --dir): the committed lock, refused with the orchestrator's drift message
// when it does not match the workflow files, since the orchestrator would
// fail those jobs. With --compile the workflows under root are compiled in
// memory instead and nothing is written. An explicit --lock FILE is what
// `kici preview` previews, as it is: the repository's workflow files need
// not be the ones FILE was compiled from. `kici run local` runs the tree's
// workflow files, so FILE must match them; its problems name FILE.
func (ef *eventFlags) loadFreshLock(root string) (*lockfile.LockFile, error) {
	if ef.lock != "" && !ef.compile && root == "" {
		lf, _, err := ef.loadLock()
		return lf, err
	}
	if root == "" {
		r, err := findRoot(ef.dir, false)
		if err != nil {
			return nil, err
		}
		root = r
	}
	if ef.compile {
		lf, _, err := lockfile.CompileDir(root)
		if err != nil {
			return nil, err
		}
		return lf, nil
	}
	saved, lockName := ef.lock, lockfile.Path
	if ef.lock == "" {
		ef.lock = filepath.Join(root, filepath.FromSlash(lockfile.Path))
	} else {
		lockName = ef.lock // as the user wrote it
	}
	lf, _, err := ef.loadLock()
	ef.lock = saved
	if err != nil {
		return nil, err
	}
	if err := lockfile.CheckTreeNamed(lf, root, lockName); err != nil {
		var stale *lockfile.StaleLockError
		if errors.As(err, &stale) {
			return nil, fmt.Errorf("%w\n(refusing a stale lock; pass --compile to use the workflow files as they are, compiled in memory)", err)
		}
		return nil, err
	}
	return lf, nil
}

// exportTree writes the files of commit rev under .kici (workflows and
// lock) to a new temporary directory and returns it, for checks against a
// commit instead of the working tree. The caller removes it.
func exportTree(root, rev string) (string, error) {
	dir, err := os.MkdirTemp("", "kici-tree-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" .kici | tar -x -C "$3"`, "sh", root, rev, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("reading .kici at %s: %v: %s", rev, err, out)
	}
	return dir, nil
}
