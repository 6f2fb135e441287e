package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/termsafe"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// failedStepTail is how many of a failed step's last log lines the summary
// repeats, so the reason for a failure sits next to the table.
const failedStepTail = 20

// printFailedSteps writes, for every failed step, its last log lines. Jobs
// that failed before any step (checkout, setup) show their setup log.
func (a *app) printFailedSteps(ctx context.Context, w io.Writer, runID string, jobs []apitypes.JobView) error {
	c, err := a.api()
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Status != status.JobFailed && j.Status != status.JobTimedOutStale {
			continue
		}
		shown := false
		for _, s := range j.Steps {
			if s.StepIndex == protocol.JobLogStepIndex || s.Status != status.StepFailed {
				continue
			}
			title := fmt.Sprintf("%s / step %d %s", j.JobName, s.StepIndex, s.StepName)
			if s.ExitCode != nil {
				title += fmt.Sprintf(" (exit %d)", *s.ExitCode)
			}
			if err := a.printTail(ctx, c, w, runID, j.JobID, s.StepIndex, title); err != nil {
				return err
			}
			shown = true
		}
		if !shown {
			if err := a.printTail(ctx, c, w, runID, j.JobID, -1, j.JobName+" / setup"); err != nil {
				return err
			}
		}
	}
	return nil
}

// printTail prints the last failedStepTail lines of one step's log.
func (a *app) printTail(ctx context.Context, c *Client, w io.Writer, runID, jobID string, step int, title string) error {
	var lines []apitypes.LogLineView
	cursor := 0
	for {
		var page apitypes.LogsPage
		path := fmt.Sprintf("%s/runs/%s/jobs/%s/steps/%d/logs", apitypes.AdminPrefix, url.PathEscape(runID), url.PathEscape(jobID), step)
		q := url.Values{"cursor": {strconv.Itoa(cursor)}, "limit": {strconv.Itoa(apitypes.MaxLogLimit)}}
		if _, err := c.Get(ctx, path, q, &page); err != nil {
			return err
		}
		lines = append(lines, page.Lines...)
		if len(lines) > failedStepTail {
			lines = lines[len(lines)-failedStepTail:]
		}
		if len(page.Lines) < apitypes.MaxLogLimit {
			break
		}
		cursor = page.NextCursor
	}
	fmt.Fprintf(w, "\n--- %s: last %d log lines ---\n", title, len(lines))
	if len(lines) == 0 {
		fmt.Fprintln(w, "(no output)")
	}
	for _, l := range lines {
		fmt.Fprintln(w, termsafe.Line(l.Msg))
	}
	return nil
}
