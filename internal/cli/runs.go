package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"kici.dev/kici/internal/runs/status"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/protocol"
)

func (a *app) runsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Inspect workflow runs, their jobs, steps and logs",
		Example: `  kici-admin runs list --status failed
  kici-admin runs show <run-id>
  kici-admin runs logs <run-id> --follow
  kici-admin runs wait <run-id> --timeout 10m`,
	}
	cmd.AddCommand(a.runsListCommand(), a.runsShowCommand(), a.runsSummaryCommand(),
		a.runsJobsCommand(), a.runsLogsCommand(), a.runsWaitCommand(), a.runsCancelCommand(), a.runsRerunCommand(),
		a.runsArtifactsCommand(), a.runsStartCommand())
	return cmd
}

func (a *app) runsListCommand() *cobra.Command {
	var status, workflow, workflowAlias, branch, repo, delivery, since string
	var count bool
	var limit, offset int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Example: `  kici-admin runs list
  kici-admin runs list --status running,queued --limit 50
  kici-admin runs list --workflow ci --branch main --status failed
  kici-admin runs list --workflow ci --repo demo/app --since 2026-01-01T00:00:00Z
  kici-admin runs list --delivery-id generic:demo:...:5d1c... --json
  kici-admin runs list --status failed --count`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workflowAlias != "" {
				if workflow != "" && workflow != workflowAlias {
					return fmt.Errorf("--workflow %q and --workflow-name %q disagree: --workflow-name is the old name of --workflow, pass one", workflow, workflowAlias)
				}
				workflow = workflowAlias
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"status": status, "workflowName": workflow, "branch": branch, "repo": repo, "deliveryId": delivery, "since": since} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if count {
				q.Set("count", "true")
			}
			q.Set("limit", strconv.Itoa(limit))
			q.Set("offset", strconv.Itoa(offset))
			var resp struct {
				Runs   []apitypes.RunView `json:"runs"`
				Total  int                `json:"total"`
				Limit  int                `json:"limit"`
				Offset int                `json:"offset"`
			}
			raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/runs", q, &resp)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			if count {
				fmt.Fprintln(a.out(), resp.Total)
				return nil
			}
			if a.quiet {
				for _, r := range resp.Runs {
					fmt.Fprintln(a.out(), r.RunID)
				}
				return nil
			}
			if len(resp.Runs) == 0 {
				fmt.Fprintf(a.out(), "No runs (total %d).\n", resp.Total)
				return nil
			}
			t := newTable(a.out(), "RUN ID", "WORKFLOW", "STATUS", "REPO", "REF", "SHA", "CREATED", "DURATION")
			for _, r := range resp.Runs {
				name := r.WorkflowName
				if r.WorkflowOrigin != "" {
					name += " (org-wide)"
				}
				t.row(r.RunID, name, string(r.Status), r.RepoIdentifier, r.Ref, short(r.SHA, 8), fmtTime(&r.CreatedAt), fmtMs(r.DurationMs))
			}
			t.flush()
			fmt.Fprintf(a.out(), "Showing %d–%d of %d\n", resp.Offset+1, resp.Offset+len(resp.Runs), resp.Total)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "comma-separated statuses (pending, running, success, failed, cancelled, …)")
	f.StringVar(&workflow, "workflow", "", "only runs of this workflow (its name, as `runs start --workflow` takes it)")
	f.StringVar(&workflowAlias, "workflow-name", "", "old name of --workflow, still accepted")
	f.StringVar(&branch, "branch", "", "only runs of this branch: pushes to it and pull requests into it (main or refs/heads/main)")
	f.StringVar(&repo, "repo", "", "only runs of this repository identifier (<org>/<name>)")
	f.StringVar(&delivery, "delivery-id", "", "only runs created by this delivery")
	f.StringVar(&since, "since", "", "only runs created after this ISO 8601 time")
	f.BoolVar(&count, "count", false, "print only the number of matching runs")
	f.IntVar(&limit, "limit", 20, "page size (max 100)")
	f.IntVar(&offset, "offset", 0, "rows to skip")
	return cmd
}

// fetchRun gets one run.
func (a *app) fetchRun(ctx context.Context, id string) (*apitypes.RunView, []byte, error) {
	c, err := a.api()
	if err != nil {
		return nil, nil, err
	}
	var resp struct {
		Run apitypes.RunView `json:"run"`
	}
	raw, err := c.Get(ctx, apitypes.AdminPrefix+"/runs/"+url.PathEscape(id), nil, &resp)
	if err != nil {
		return nil, nil, err
	}
	return &resp.Run, raw, nil
}

// fetchJobs gets a run's jobs (with steps when steps is true).
func (a *app) fetchJobs(ctx context.Context, runID string, steps bool) ([]apitypes.JobView, []byte, error) {
	c, err := a.api()
	if err != nil {
		return nil, nil, err
	}
	q := url.Values{}
	if steps {
		q.Set("includeSteps", "true")
	}
	var resp struct {
		Jobs []apitypes.JobView `json:"jobs"`
	}
	raw, err := c.Get(ctx, apitypes.AdminPrefix+"/runs/"+url.PathEscape(runID)+"/jobs", q, &resp)
	if err != nil {
		return nil, nil, err
	}
	return resp.Jobs, raw, nil
}

func (a *app) runsShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show <run-id>",
		Short: "Show a run with a table of its jobs and steps",
		Example: `  kici-admin runs show <run-id>
  kici-admin runs show <run-id> --json   # {"run": {...}, "jobs": [...]}`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, rawRun, err := a.fetchRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			jobs, rawJobs, err := a.fetchJobs(cmd.Context(), run.RunID, true)
			if err != nil {
				return err
			}
			if a.json {
				var r, j map[string]json.RawMessage
				_ = json.Unmarshal(rawRun, &r)
				_ = json.Unmarshal(rawJobs, &j)
				printValue(a.out(), map[string]json.RawMessage{"run": r["run"], "jobs": j["jobs"]})
				return nil
			}
			w := a.out()
			t := newTable(w, "FIELD", "VALUE")
			t.row("run", run.RunID)
			t.row("workflow", run.WorkflowName)
			if run.WorkflowOrigin != "" {
				t.row("defined in", run.WorkflowOrigin+" (organization-wide)")
			}
			t.row("status", string(run.Status))
			t.row("repo", run.RepoIdentifier)
			t.row("ref", run.Ref)
			t.row("sha", run.SHA)
			t.row("delivery", deref(run.DeliveryID))
			t.row("triggered by", deref(run.TriggeredBy))
			t.row("created", fmtTime(&run.CreatedAt))
			t.row("started", fmtTime(run.StartedAt))
			t.row("completed", fmtTime(run.CompletedAt))
			t.row("duration", fmtMs(run.DurationMs))
			if run.FailureReason != nil {
				t.row("failure", *run.FailureReason)
			}
			t.flush()
			fmt.Fprintln(w)
			printSummary(w, jobs)
			return nil
		},
	}
}

func (a *app) runsSummaryCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "summary <run-id>",
		Short:   "Print a table of a run's jobs × steps with status and durations, then the last log lines of each failed step",
		Example: `  kici-admin runs summary <run-id>`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, _, err := a.fetchRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			jobs, raw, err := a.fetchJobs(cmd.Context(), run.RunID, true)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			fmt.Fprintf(a.out(), "Run %s (%s): %s, %s\n", run.RunID, run.WorkflowName, run.Status, fmtMs(run.DurationMs))
			printSummary(a.out(), jobs)
			return a.printFailedSteps(cmd.Context(), a.out(), run.RunID, jobs)
		},
	}
}

// printSummary writes the jobs × steps table: one row per job, then one
// indented row per step.
func printSummary(w io.Writer, jobs []apitypes.JobView) {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "No jobs.")
		return
	}
	t := newTable(w, "JOB", "STEP", "STATUS", "DURATION", "DETAIL")
	for _, j := range jobs {
		detail := deref(j.ErrorMessage)
		if detail == "-" && j.RoutingReason != nil && !j.Status.IsTerminal() {
			detail = *j.RoutingReason
		}
		if detail == "-" && j.AgentID != nil {
			detail = "agent " + *j.AgentID
		}
		t.row(j.JobName, "", string(j.Status), fmtMs(j.DurationMs), detail)
		for _, s := range j.Steps {
			if s.StepIndex == protocol.JobLogStepIndex {
				continue
			}
			d := deref(s.ErrorMessage)
			if d == "-" && s.ExitCode != nil && *s.ExitCode != 0 {
				d = fmt.Sprintf("exit %d", *s.ExitCode)
			}
			t.row("", fmt.Sprintf("%d %s", s.StepIndex, s.StepName), string(s.Status), fmtMs(s.DurationMs), d)
		}
	}
	t.flush()
}

func (a *app) runsJobsCommand() *cobra.Command {
	var steps bool
	cmd := &cobra.Command{
		Use:   "jobs <run-id>",
		Short: "List a run's jobs",
		Example: `  kici-admin runs jobs <run-id>
  kici-admin runs jobs <run-id> --include-steps --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			jobs, raw, err := a.fetchJobs(cmd.Context(), args[0], steps)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			if steps {
				printSummary(a.out(), jobs)
				return nil
			}
			t := newTable(a.out(), "JOB ID", "NAME", "STATUS", "AGENT", "STARTED", "DURATION", "REASON/ERROR")
			for _, j := range jobs {
				detail := deref(j.ErrorMessage)
				if detail == "-" {
					detail = deref(j.RoutingReason)
				}
				t.row(j.JobID, j.JobName, string(j.Status), deref(j.AgentID), fmtTime(j.StartedAt), fmtMs(j.DurationMs), detail)
			}
			t.flush()
			printJobOutputs(a.out(), jobs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&steps, "include-steps", false, "include each job's steps")
	return cmd
}

// errWaitTimeout is the cause `runs wait` gives its context's deadline.
var errWaitTimeout = errors.New("--timeout passed")

// waitEnded is why `runs wait` stopped before the run finished: its
// --timeout passed, or it was interrupted (a signal cancelled ctx), which
// it must not call a timeout.
func waitEnded(ctx context.Context, timeout time.Duration, runID, last string) error {
	if errors.Is(context.Cause(ctx), errWaitTimeout) {
		return fmt.Errorf("timed out after %s waiting for run %s (status %s)", timeout, runID, last)
	}
	return fmt.Errorf("interrupted while waiting for run %s (status %s); the run goes on", runID, last)
}

func (a *app) runsWaitCommand() *cobra.Command {
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "wait <run-id>",
		Short: "Wait until a run is finished; exit 0 if it succeeded, 1 otherwise",
		Long: `Poll a run until it reaches a terminal status (success, failed, cancelled),
print the final status, and exit 0 for success or 1 for anything else
(including a timeout).`,
		Example: `  kici-admin runs wait <run-id>
  kici-admin runs wait <run-id> --timeout 10m && echo green`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, timeout, errWaitTimeout)
				defer cancel()
			}
			last := ""
			for {
				run, raw, err := a.fetchRun(ctx, args[0])
				if err != nil {
					if ctx.Err() != nil && last != "" {
						return waitEnded(ctx, timeout, args[0], last)
					}
					return err
				}
				if string(run.Status) != last && !a.json {
					fmt.Fprintf(a.io.Stderr, "run %s: %s\n", run.RunID, run.Status)
				}
				last = string(run.Status)
				if run.Status.IsTerminal() {
					if a.json {
						printJSON(a.out(), raw)
					} else {
						msg := fmt.Sprintf("Run %s %s in %s", run.RunID, run.Status, fmtMs(run.DurationMs))
						if run.FailureReason != nil {
							msg += ": " + *run.FailureReason
						}
						fmt.Fprintln(a.out(), msg)
					}
					if run.Status == status.RunSuccess {
						return nil
					}
					return &ExitError{Code: 1}
				}
				select {
				case <-ctx.Done():
					return waitEnded(ctx, timeout, args[0], last)
				case <-time.After(interval):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long (0 = never)")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "poll interval")
	return cmd
}
