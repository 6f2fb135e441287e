package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/pipeline"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
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
		case runner.StateRunning:
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
	local := &cobra.Command{
		Use:   "local <event-type>",
		Short: "Run the jobs of the workflows an event matches, on this machine",
		Long: `Match the event (same flags as "kici preview") against the lock, then run
every job of every matched workflow on this machine with the agent's job
runner: the repository's HEAD commit is checked out into a temporary work
directory (uncommitted changes are not included), steps run with the
agent's environment rules, and logs are printed as they come. Jobs run one
at a time in "needs" order; a job whose needs are not met is skipped (the
same rules as the orchestrator), and every matrix leg is its own job.
Labels (runsOn) are not checked: everything runs here.

The exit code is 0 when every job succeeded or was skipped, 1 when a job
failed or was cancelled, and 2 when no workflow matched.`,
		Example: `  kici run local push --branch main
  kici run local pr --action opened --target-branch main --source-branch feature/x`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ev, err := ef.buildEvent(args)
			if err != nil {
				return err
			}
			lf, lockPath, err := ef.loadLock()
			if err != nil {
				return err
			}
			root := filepath.Dir(filepath.Dir(lockPath))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runLocal(ctx, stdout, root, lf, ev)
		},
	}
	ef.register(local)
	run.AddCommand(local)
	return run
}

// runLocal runs every matched workflow's jobs and returns an *exitError
// unless all succeeded.
func runLocal(ctx context.Context, stdout io.Writer, root string, lf *lockfile.LockFile, ev *trigger.Event) error {
	sha, err := gitOut(root, "rev-parse", "HEAD")
	if err != nil {
		return fmt.Errorf("%s: no commit to run (git rev-parse HEAD: %v)", root, err)
	}
	ref, _ := gitOut(root, "symbolic-ref", "-q", "HEAD")
	if ref == "" {
		ref = sha
	}
	if dirty, _ := gitOut(root, "status", "--porcelain"); dirty != "" {
		fmt.Fprintf(stdout, "note: uncommitted changes are not part of the run (it checks out %s)\n", sha[:12])
	}
	repo := ev.SourceRepo
	if repo == "" {
		repo = "local/" + filepath.Base(root)
	}
	em := &printEmitter{w: stdout, names: map[string]string{}}
	r := runner.New(runner.Options{HostEnv: os.Environ()}, em)

	matched, failed := 0, 0
	for i := range lf.Workflows {
		wf := &lf.Workflows[i]
		d := trigger.MatchWorkflow(wf, ev)
		if !d.Matched {
			fmt.Fprintf(stdout, "skip workflow %s: %s\n", wf.Name, d.Summary)
			continue
		}
		matched++
		run, jobs, err := pipeline.BuildRun(wf, pipeline.RunContext{
			RepoIdentifier: repo, RepoURL: "file://" + root, Ref: ref, SHA: sha, TriggeredBy: "kici run local",
		})
		if err != nil {
			fmt.Fprintf(stdout, "workflow %s: %v\n", wf.Name, err)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "run workflow %s (%s, %d jobs)\n", wf.Name, d.Summary, len(jobs))
		statuses := runJobs(ctx, stdout, r, em, run, jobs)
		for _, j := range jobs {
			fmt.Fprintf(stdout, "  %-40s %s\n", j.JobName, statuses[j.JobName])
			if s := statuses[j.JobName]; s != runner.StateSuccess && s != runner.StateSkipped {
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

// runJobs runs a run's jobs one at a time in needs order and returns each
// job's terminal status. A job runs once every upstream is terminal and
// each upstream status is in that edge's runOn set; otherwise it is
// skipped (KiCI needs-scheduler rules).
func runJobs(ctx context.Context, stdout io.Writer, r *runner.Runner, em *printEmitter, run *store.Run, jobs []*store.Job) map[string]string {
	status := map[string]string{}
	for len(status) < len(jobs) {
		progressed := false
		for _, j := range jobs {
			if _, done := status[j.JobName]; done {
				continue
			}
			ready, skip := true, ""
			for _, n := range j.Needs {
				s, ok := status[n.Upstream]
				if !ok {
					ready = false
					break
				}
				if !slices.Contains(n.RunOn, s) && skip == "" {
					skip = fmt.Sprintf("upstream_unmet: %s (%s)", n.Upstream, s)
				}
			}
			if !ready {
				continue
			}
			progressed = true
			if skip != "" {
				fmt.Fprintf(stdout, "[%s] skipped: %s\n", j.JobName, skip)
				status[j.JobName] = runner.StateSkipped
				continue
			}
			if ctx.Err() != nil {
				status[j.JobName] = runner.StateCancelled
				continue
			}
			em.mu.Lock()
			em.names[j.ID] = j.JobName
			em.mu.Unlock()
			env := map[string]string{
				"CI": "true", "KICI": "true", "KICI_LOCAL_RUN": "true",
				"KICI_RUN_ID": run.ID, "KICI_JOB_ID": j.ID, "KICI_JOB_NAME": j.JobName,
				"KICI_WORKFLOW_NAME": run.WorkflowName, "KICI_REPO": run.RepoIdentifier,
				"KICI_REF": run.Ref, "KICI_SHA": run.SHA,
			}
			for k, v := range j.MatrixValues {
				env["KICI_MATRIX_"+envKey(k)] = v
			}
			fmt.Fprintf(stdout, "[%s] job started\n", j.JobName)
			res := r.Run(ctx, &protocol.JobDispatch{
				Type: protocol.TypeJobDispatch, MessageID: uuid.NewString(), RunID: run.ID, JobID: j.ID,
				JobName: j.JobName, WorkflowName: run.WorkflowName, RepoURL: run.RepoURL, Ref: run.Ref, SHA: run.SHA,
				JobConfig: j.Config, MatrixValues: j.MatrixValues, Env: env,
			})
			msg := res.State
			if res.Error != "" {
				msg += ": " + res.Error
			}
			fmt.Fprintf(stdout, "[%s] job %s (%s)\n", j.JobName, msg, res.Duration.Round(1e6))
			status[j.JobName] = res.State
		}
		if !progressed { // a need on a job that never runs (cannot happen after BuildRun); stop
			for _, j := range jobs {
				if _, done := status[j.JobName]; !done {
					status[j.JobName] = runner.StateSkipped
				}
			}
		}
	}
	return status
}

// envKey upper-cases a matrix key and replaces anything but [A-Z0-9_] by _
// (as the orchestrator's dispatcher does).
func envKey(k string) string {
	b := []byte(strings.ToUpper(k))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

func gitOut(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}
