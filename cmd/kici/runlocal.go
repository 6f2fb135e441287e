package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"kici.dev/kici/internal/runs/status"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/trigger"
)

// printEmitter is the in-process runner.Emitter of `kici run local`: it
// prints log lines and step/job transitions instead of sending them to an
// orchestrator.
type printEmitter struct {
	mu    sync.Mutex
	w     io.Writer
	names map[string]string // jobID → job name
}

// Send prints one runner message.
func (e *printEmitter) Send(msg any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch m := msg.(type) {
	case *protocol.LogChunk:
		for _, l := range m.Lines {
			fmt.Fprintf(e.w, "[%s] %s\n", e.names[m.JobID], l.Text)
		}
	case *protocol.StepStatus:
		switch m.State {
		case status.StepRunning:
			fmt.Fprintf(e.w, "[%s] ── step %s\n", e.names[m.JobID], m.StepName)
		default:
			extra := ""
			if m.Data != nil && m.Data.Error != "" {
				extra = ": " + m.Data.Error
			}
			fmt.Fprintf(e.w, "[%s] ── step %s %s%s\n", e.names[m.JobID], m.StepName, m.State, extra)
		}
	}
}

func newRunCmd(stdout io.Writer) *cobra.Command {
	run := &cobra.Command{
		Use:   "run",
		Short: "Run workflows without an orchestrator",
	}
	var ef eventFlags
	var committed bool
	var inputs []string
	local := &cobra.Command{
		Use:   "local <event-type>",
		Short: "Run the jobs of the workflows an event matches, on this machine",
		Long: `Match the event (same flags as "kici preview") against the lock, then run
every job of every matched workflow on this machine with the agent's job
runner. By default the working tree runs as it is, uncommitted and
untracked (not ignored) files included: kici snapshots it as a commit
object (your branch, index and files are not touched) and checks that out
into a temporary work directory. --committed runs HEAD instead.

The lock must match the workflow files of what runs (the orchestrator
fails drifted jobs the same way); --compile compiles them in memory
instead. Jobs are released, skipped and completed by the orchestrator's
own execution tracker (needs, when:, if: conditions, outputs), over a
throw-away database, and run one at a time; every matrix leg is its own
job. Labels (runsOn) are not checked: everything runs here.

The exit code is 0 when every job succeeded or was skipped, 1 when a job
failed or was cancelled, and 2 when no workflow matched.`,
		Example: `  kici run local push --branch main
  kici run local dispatch --input target=staging --committed
  kici run local pr --action opened --target-branch main --source-branch feature/x`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ev, err := ef.buildEvent(args)
			if err != nil {
				return err
			}
			root, err := findRoot(ef.dir, false)
			if err != nil {
				return err
			}
			in, err := parseInputFlags(inputs)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			src, cleanup, err := localSource(root, committed)
			if err != nil {
				return err
			}
			defer cleanup()
			lf, err := ef.loadFreshLock(src.tree)
			if err != nil {
				return err
			}
			return runLocal(ctx, stdout, root, src, lf, ev, in)
		},
	}
	ef.register(local)
	local.Flags().BoolVar(&committed, "committed", false, "run the HEAD commit instead of the working tree")
	local.Flags().StringArrayVar(&inputs, "input", nil, "an input of a dispatch or schedule trigger, name=value (repeatable)")
	run.AddCommand(local)
	return run
}

// parseInputFlags turns --input name=value flags into raw input values.
func parseInputFlags(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--input %q: expected name=value", f)
		}
		out[k] = v
	}
	return out, nil
}

// runLocal runs every matched workflow's jobs and returns an *exitError
// unless all succeeded.
func runLocal(ctx context.Context, stdout io.Writer, root string, src *localTree, lf *lockfile.LockFile, ev *trigger.Event, inputs map[string]string) error {
	repo := ev.SourceRepo
	if repo == "" {
		repo = "local/" + filepath.Base(root)
	}
	em := &printEmitter{w: stdout, names: map[string]string{}}
	state, err := localStateDir(root)
	if err != nil {
		return err
	}
	// Like a job on the server's default agent: a HOME of its own (state
	// carries over through declared caches only), the cache and artifact
	// routes, and provenance signing for `attest:`.
	eng, err := newLocalEngine(ctx, state, em, func(blobsURL string, attest runner.AttestFunc) *runner.Runner {
		return runner.New(runner.Options{HostEnv: os.Environ(), Blobs: runner.BlobOptions{BaseURL: blobsURL, JobHome: true}, Attest: attest}, em)
	})
	if err != nil {
		return err
	}
	defer eng.close()

	matched, failed := 0, 0
	for i := range lf.Workflows {
		wf := &lf.Workflows[i]
		d := trigger.MatchWorkflow(wf, ev)
		if !d.Matched {
			fmt.Fprintf(stdout, "skip workflow %s: %s\n", wf.Name, d.Summary)
			continue
		}
		matched++
		rc, err := manualInputs(wf, d, ev, inputs)
		if err != nil {
			return err
		}
		run, jobs, err := ingest.BuildRun(wf, ingest.RunContext{
			RepoIdentifier: repo, RepoURL: "file://" + root, Ref: src.ref, SHA: src.sha, TriggeredBy: "kici run local",
			TriggerType: ev.Type, TargetBranch: ev.TargetBranch,
		})
		if err != nil {
			fmt.Fprintf(stdout, "workflow %s: %v\n", wf.Name, err)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "run workflow %s (%s, %d jobs)\n", wf.Name, d.Summary, len(jobs))
		final, err := eng.run(ctx, run, jobs, rc)
		if err != nil {
			return err
		}
		for _, j := range final {
			line := fmt.Sprintf("  %-40s %s", j.JobName, j.Status)
			if j.Status == status.JobSkipped && j.ErrorMessage != "" {
				line += " (" + j.ErrorMessage + ")"
			}
			fmt.Fprintln(stdout, line)
			if j.Status != status.JobSuccess && j.Status != status.JobSkipped {
				failed++
			}
		}
	}
	switch {
	case matched == 0:
		return &exitError{code: 2, msg: "no workflow matched the event (see `kici preview` for why)"}
	case failed > 0:
		return &exitError{code: 1, msg: fmt.Sprintf("%d job(s) did not succeed", failed)}
	}
	fmt.Fprintln(stdout, "all jobs succeeded")
	return nil
}

func gitOut(dir string, args ...string) (string, error) {
	out, err := gitCmd(dir, args...).Output()
	return strings.TrimSpace(string(out)), err
}

func gitCmd(dir string, args ...string) *exec.Cmd {
	return exec.Command("git", append([]string{"-C", dir}, args...)...)
}
