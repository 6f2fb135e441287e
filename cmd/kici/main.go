// Command kici is the workflow author's CLI: it scaffolds workflows
// (`kici init`) and compiles `.kici/workflows/*.yaml` into the lock file
// `.kici/kici.lock.json` (`kici compile`, `kici compile --check`).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/lockfile"
)

// version is set at build time with -ldflags "-X main.version=…"; local
// provenance statements name it as the builder's version.
var version = "dev"

// exitError carries a process exit code for main.
type exitError struct {
	code int
	msg  string
}

// Error returns the message printed before exiting.
func (e *exitError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI with args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kici",
		Short: "Author and compile kici workflows",
		Long: `kici is the workflow author's CLI.

Workflows are YAML files under .kici/workflows/ (one workflow per file).
"kici compile" turns them into .kici/kici.lock.json, the file the
orchestrator reads at each commit; commit both. See docs/workflows.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newInitCmd(stdout), newCompileCmd(stdout))
	root.AddCommand(newPreviewCmd(stdout), newHookCmd(stdout), newRunCmd(stdout))
	root.AddCommand(newVerifyCmd(stdout))
	return root
}

func newInitCmd(stdout io.Writer) *cobra.Command {
	var dir string
	var withHook bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a sample workflow in .kici/workflows/ci.yaml",
		Long: `Create .kici/workflows/ci.yaml with a small sample workflow at the
repository root (the nearest directory, from --dir upwards, holding .git or
.kici; --dir itself when there is none). It refuses to overwrite an existing
file.`,
		Example: `  kici init
  kici init --dir path/to/repo && kici compile --dir path/to/repo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := findRoot(dir, true)
			if err != nil {
				return err
			}
			path := filepath.Join(root, filepath.FromSlash(lockfile.WorkflowDir), "ci.yaml")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				if errors.Is(err, os.ErrExist) {
					return &exitError{code: 1, msg: fmt.Sprintf("Error: %s already exists; not overwriting it", rel(path))}
				}
				return err
			}
			if _, err := f.WriteString(sampleWorkflow); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "created %s\n", rel(path))
			if withHook {
				hookPath, err := installHook(root, false)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "installed %s (compiles and stages the lock on each commit)\n", rel(hookPath))
			}
			fmt.Fprintf(stdout, "next: edit it, then run `kici compile` and commit both files\n")
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory inside the repository")
	cmd.Flags().BoolVar(&withHook, "hook", false, "also install the pre-commit hook (see `kici hook install`)")
	return cmd
}

func newCompileCmd(stdout io.Writer) *cobra.Command {
	var dir string
	var check bool
	cmd := &cobra.Command{
		Use:   "compile",
		Short: "Compile .kici/workflows/*.yaml into .kici/kici.lock.json",
		Long: `Compile every workflow in .kici/workflows/*.yaml (sorted by file name)
into .kici/kici.lock.json at the repository root (the nearest directory,
from --dir upwards, holding .git or .kici).

With --check nothing is written: the command exits 0 and prints
"lock file is up to date" when the committed lock matches a fresh compile,
and exits 1 with "lock file is stale: run kici compile" (or the workflow
errors, as file:line:column: message) otherwise. Use it in CI and in a
pre-commit hook.`,
		Example: `  kici compile
  kici compile --dir services/api
  kici compile --check   # in CI: fail when the lock is out of date`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := findRoot(dir, false)
			if err != nil {
				return err
			}
			if check {
				switch err := lockfile.Check(root); {
				case err == nil:
					fmt.Fprintln(stdout, "lock file is up to date")
					return nil
				case errors.Is(err, lockfile.ErrStale), errors.Is(err, lockfile.ErrMissing):
					return &exitError{code: 1, msg: err.Error()}
				default:
					return compileFailure(err)
				}
			}
			lf, changed, err := lockfile.Write(root)
			if err != nil {
				return compileFailure(err)
			}
			state := "unchanged"
			if changed {
				state = "written"
			}
			fmt.Fprintf(stdout, "%s %s (%d workflows)\n", lockfile.Path, state, len(lf.Workflows))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory inside the repository")
	cmd.Flags().BoolVar(&check, "check", false, "verify the lock file is up to date instead of writing it")
	return cmd
}

// compileFailure reports compile errors one per line, file:line:column first.
func compileFailure(err error) error {
	var ces lockfile.CompileErrors
	if errors.As(err, &ces) {
		return &exitError{code: 1, msg: fmt.Sprintf("%s\n%d error(s) in workflows", ces.Error(), len(ces))}
	}
	return err
}

// findRoot walks up from dir to the first directory containing .kici or
// .git. When none is found it returns dir itself if orSelf, else an error.
func findRoot(dir string, orSelf bool) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	for cur := abs; ; {
		for _, marker := range []string{".kici", ".git"} {
			if _, err := os.Stat(filepath.Join(cur, marker)); err == nil {
				return cur, nil
			}
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		cur = parent
	}
	if orSelf {
		return abs, nil
	}
	return "", fmt.Errorf("no repository found: neither %s nor a parent directory holds .kici or .git (run `kici init`)", dir)
}

func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !filepath.IsAbs(r) && len(r) < len(path) {
		return r
	}
	return path
}

// sampleWorkflow is what `kici init` writes.
const sampleWorkflow = `# kici workflow — see docs/workflows.md for the full format.
# After editing, run "kici compile" and commit this file and .kici/kici.lock.json.
name: ci
description: Build and test on every push to main and on pull requests.

on:
  push:
    branches: [main]
  pr:
    targetBranches: [main]

timeout: 30m

jobs:
  build:
    runsOn: [kici:os:linux]
    timeout: 15m
    steps:
      - name: show environment
        run: uname -a && env | sort | grep ^KICI_ || true
      - name: build
        run: echo "replace me with your build command"
`
