package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// hookMarker identifies a pre-commit hook written by kici; any other
// existing hook is foreign and is only replaced with --force.
const hookMarker = "# kici-managed pre-commit hook"

// hookScript is the pre-commit hook: it compiles the workflows and stages
// the lock, so the committed lock always matches the committed YAML. %q is
// the kici binary that installed it (used when `kici` is not on PATH).
const hookScript = `#!/bin/sh
` + hookMarker + ` (written by "kici hook install"; delete this file to disable).
# Compiles .kici/workflows/*.yaml into .kici/kici.lock.json and stages the lock.
set -e
KICI_BIN=%s
if ! [ -x "$KICI_BIN" ]; then KICI_BIN=kici; fi
root=$(git rev-parse --show-toplevel)
[ -d "$root/.kici/workflows" ] || exit 0
if ! "$KICI_BIN" compile --dir "$root"; then
	echo "kici: the workflows do not compile; commit aborted (fix them or commit with --no-verify)" >&2
	exit 1
fi
git -C "$root" add .kici/kici.lock.json
`

// installHook writes the pre-commit hook into the repository containing
// dir (honouring core.hooksPath). An existing hook that kici did not write
// is kept unless force; the error says so.
func installHook(dir string, force bool) (string, error) {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--git-path", "hooks").Output()
	if err != nil {
		return "", fmt.Errorf("%s is not inside a git repository (run `git init` first)", dir)
	}
	hooks := strings.TrimSpace(string(out))
	if !filepath.IsAbs(hooks) {
		hooks = filepath.Join(dir, hooks)
	}
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(hooks, "pre-commit")
	if old, err := os.ReadFile(path); err == nil && !bytes.Contains(old, []byte(hookMarker)) && !force {
		return path, &exitError{code: 1, msg: fmt.Sprintf("Error: %s already exists and was not written by kici; not overwriting it (use --force to replace it, or call `kici compile && git add %s` from it)", path, ".kici/kici.lock.json")}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return path, err
	}
	bin, err := os.Executable()
	if err != nil {
		bin = "kici"
	}
	script := fmt.Sprintf(hookScript, shellQuote(bin))
	tmp := path + ".kici-tmp"
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		return path, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return path, err
	}
	return path, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newHookCmd(stdout io.Writer) *cobra.Command {
	hook := &cobra.Command{
		Use:   "hook",
		Short: "Manage the git pre-commit hook that keeps the lock file in sync",
	}
	var dir string
	var force bool
	install := &cobra.Command{
		Use:   "install",
		Short: "Install a pre-commit hook that compiles the workflows and stages the lock",
		Long: `Install .git/hooks/pre-commit (or the hook in core.hooksPath): before each
commit it runs "kici compile" and stages .kici/kici.lock.json, and aborts
the commit when a workflow does not compile. A pre-commit hook that kici
did not write is left alone unless --force is given. Re-running the
command updates kici's own hook.`,
		Example: `  kici hook install
  kici hook install --force   # replace an existing foreign hook`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := installHook(dir, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "installed %s\n", rel(path))
			return nil
		},
	}
	install.Flags().StringVar(&dir, "dir", ".", "directory inside the repository")
	install.Flags().BoolVar(&force, "force", false, "replace an existing pre-commit hook not written by kici")
	hook.AddCommand(install)
	return hook
}
