package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"kici.dev/kici/internal/trigger"
)

// maxGateFile bounds a file `kici preview` and `kici run local` read for a
// `requires` gate, like the orchestrator (1 MiB).
const maxGateFile = 1 << 20

// worktreeFiles reads `requires` files from the working tree at root
// (kici preview / run local see the files as they are here, committed or
// not). Paths were checked by the compiler; a symlink out of root is
// refused anyway, the lock being input.
type worktreeFiles struct{ root string }

// ReadFile implements trigger.FileReader.
func (w worktreeFiles) ReadFile(p string) ([]byte, error) {
	full := filepath.Join(w.root, filepath.FromSlash(p))
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, trigger.ErrFileNotFound)
	}
	root, _ := filepath.EvalSymlinks(w.root)
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s leads out of the repository", p)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", p, trigger.ErrFileNotFound)
	}
	if fi.Size() > maxGateFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxGateFile)
	}
	return os.ReadFile(real)
}

// withGateFacts gives a push or pull_request event what the trigger gates
// read, unless already set: the commit message (--message, a --payload's
// head_commit.message, else HEAD's message in the repository around dir)
// and the working tree's files.
func (ef *eventFlags) withGateFacts(ev *trigger.Event) {
	if ev.Type != "push" && ev.Type != "pull_request" {
		return
	}
	if ef.message != "" {
		ev.CommitMessage = ef.message
	}
	if ev.CommitMessage == "" {
		if hc, ok := ev.Payload["head_commit"].(map[string]any); ok {
			ev.CommitMessage, _ = hc["message"].(string)
		}
	}
	root, err := findRoot(ef.dir, true)
	if err != nil {
		return
	}
	if ev.CommitMessage == "" && ef.payload == "" {
		cmd := exec.Command("git", "-C", root, "log", "-1", "--format=%B")
		if out, err := cmd.Output(); err == nil {
			ev.CommitMessage = strings.TrimRight(string(out), "\n")
		}
	}
	ev.Files = worktreeFiles{root: root}
}
