package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/termsafe"
	"kici.dev/kici/internal/protocol"
)

// logStream is one step log (or the job-level setup bucket, index -1).
type logStream struct {
	job    apitypes.JobView
	index  int
	label  string // "[job/step] "
	name   string // step name, "setup" for index -1
	cursor int
}

func (a *app) runsLogsCommand() *cobra.Command {
	var jobSel string
	var step int
	var follow, raw bool
	var limit int
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "logs <run-id>",
		Short: "Print (or follow) the step logs of a run",
		Long: `Print the logs of a run's steps, each line prefixed with "[job/step] "
(the job-level checkout/setup output is "[job/setup] "). --job selects one job
by id, name or base name (all matrix legs); --step selects one step index
(-1 = setup). --follow prints lines as they are written (over the admin API's
event streams), until the run is finished and every log has been read; when
the connection breaks (an orchestrator restart) it reconnects and resumes
each log at the next line, so no line is printed twice or missed.

--json prints JSON Lines instead, one object per log line (also with
--follow): {"jobId", "job", "step" (-1 = setup), "stepName", "ts" (Unix
milliseconds), "stream", "msg"}.`,
		Example: `  kici-admin runs logs <run-id>
  kici-admin runs logs <run-id> --follow
  kici-admin runs logs <run-id> --job build --step 2 --raw
  kici-admin runs logs <run-id> --json | jq -r 'select(.stream == "stderr") | .msg'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stepSet := cmd.Flags().Changed("step")
			return a.streamLogs(cmd.Context(), args[0], jobSel, step, stepSet, follow, raw, limit, interval)
		},
	}
	f := cmd.Flags()
	f.StringVar(&jobSel, "job", "", "job id, name or base name (default: all jobs)")
	f.IntVar(&step, "step", 0, "step index (-1 = checkout/setup; default: all steps)")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the run is finished")
	f.BoolVar(&raw, "raw", false, "print lines without the [job/step] prefix")
	f.IntVar(&limit, "limit", 500, "lines per request (max 2000)")
	f.DurationVar(&interval, "interval", 300*time.Millisecond, "first delay before reconnecting with --follow (doubles up to 5s)")
	return cmd
}

// streamLogs prints the selected logs once, or follows them until the run is
// terminal and every stream reported complete.
func (a *app) streamLogs(ctx context.Context, runID, jobSel string, step int, stepSet, follow, raw bool, limit int, interval time.Duration) error {
	c, err := a.api()
	if err != nil {
		return err
	}
	limit = min(max(limit, 1), apitypes.MaxLogLimit)
	run, _, err := a.fetchRun(ctx, runID)
	if err != nil {
		return err
	}
	jobs, _, err := a.fetchJobs(ctx, run.RunID, true)
	if err != nil {
		return err
	}
	selected, err := selectJobs(jobs, jobSel)
	if err != nil {
		return err
	}
	if follow {
		return a.followLogs(ctx, c, run.RunID, selected, jobSel, step, stepSet, raw, interval)
	}
	// Print each stream once: the setup bucket and every reported step.
	for _, j := range selected {
		idxs := []int{-1}
		for _, s := range j.Steps {
			if s.StepIndex != protocol.JobLogStepIndex { // the setup is first
				idxs = append(idxs, s.StepIndex)
			}
		}
		if stepSet {
			idxs = []int{step}
		}
		for _, i := range idxs {
			name := "setup"
			if i != protocol.JobLogStepIndex {
				name = strconv.Itoa(i)
				for _, s := range j.Steps {
					if s.StepIndex == i && s.StepName != "" {
						name = s.StepName
					}
				}
			}
			st := &logStream{job: j, index: i, name: name, label: "[" + j.JobName + "/" + name + "] "}
			if err := a.drainStream(ctx, c, run.RunID, st, raw, limit); err != nil {
				return err
			}
		}
	}
	return nil
}

// logLineJSON is one line of `runs logs --json`: JSON Lines, one object per
// log line, so that --follow streams them too. Msg is the line as stored
// (control characters are escaped by JSON, not stripped).
type logLineJSON struct {
	JobID    string `json:"jobId"`
	Job      string `json:"job"`
	Step     int    `json:"step"` // -1 = the job's checkout/setup log
	StepName string `json:"stepName"`
	TS       int64  `json:"ts"` // Unix milliseconds
	Stream   string `json:"stream"`
	Msg      string `json:"msg"`
}

// formatLogLine renders one line for the terminal ("[job/step] text", the
// label left out with raw) or, with asJSON, as a logLineJSON object.
func formatLogLine(asJSON, raw bool, label string, l logLineJSON) string {
	if asJSON {
		b, _ := json.Marshal(l)
		return string(b) + "\n"
	}
	if raw {
		label = ""
	}
	return label + termsafe.Line(l.Msg) + "\n"
}

// drainStream reads and prints every available page of one stream.
func (a *app) drainStream(ctx context.Context, c *Client, runID string, st *logStream, raw bool, limit int) error {
	for {
		q := url.Values{"cursor": {strconv.Itoa(st.cursor)}, "limit": {strconv.Itoa(limit)}}
		var page apitypes.LogsPage
		path := fmt.Sprintf("%s/runs/%s/jobs/%s/steps/%d/logs", apitypes.AdminPrefix, url.PathEscape(runID), url.PathEscape(st.job.JobID), st.index)
		if _, err := c.Get(ctx, path, q, &page); err != nil {
			return err
		}
		var b strings.Builder
		for _, l := range page.Lines {
			b.WriteString(formatLogLine(a.json, raw, st.label, logLineJSON{JobID: st.job.JobID, Job: st.job.JobName,
				Step: st.index, StepName: st.name, TS: l.TS, Stream: l.Stream, Msg: l.Msg}))
		}
		_, _ = a.out().Write([]byte(b.String())) // terminal output, as fmt.Fprint: nowhere to report a failed write
		st.cursor = page.NextCursor
		if len(page.Lines) < limit || len(page.Lines) == 0 {
			return nil
		}
	}
}

// selectJobs picks jobs by id, exact name, or base name (every matrix leg);
// sel "" selects all.
func selectJobs(jobs []apitypes.JobView, sel string) ([]apitypes.JobView, error) {
	if sel == "" {
		return jobs, nil
	}
	for _, j := range jobs {
		if j.JobID == sel {
			return []apitypes.JobView{j}, nil
		}
	}
	for _, j := range jobs {
		if j.JobName == sel {
			return []apitypes.JobView{j}, nil
		}
	}
	var out []apitypes.JobView
	for _, j := range jobs {
		if j.BaseJobName == sel {
			out = append(out, j)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	names := make([]string, 0, len(jobs))
	for _, j := range jobs {
		names = append(names, j.JobName)
	}
	return nil, fmt.Errorf("no job %q in this run (jobs: %s)", sel, strings.Join(names, ", "))
}
