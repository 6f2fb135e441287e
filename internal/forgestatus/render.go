package forgestatus

import (
	"fmt"
	"strings"
	"time"

	"kici.dev/kici/internal/store"
)

// checkName is a job's check-run name: "<workflow> / <job>", a matrix leg
// by its leg name ("test (1.22, linux)"). An organization-wide workflow's
// is "<workflow> (from <defining repo>) / <job>", so it shows beside the
// repository's own checks and never replaces one of the same name.
func checkName(run *store.Run, job *store.Job) string {
	if r := originRepo(run); r != "" {
		return run.WorkflowName + " (from " + r + ") / " + job.JobName
	}
	return run.WorkflowName + " / " + job.JobName
}

// originRepo is the defining repository of an organization-wide run's
// workflow ("" for the repository's own workflow).
func originRepo(run *store.Run) string {
	repo, _, _ := strings.Cut(run.WorkflowOrigin, "@")
	return repo
}

// StatusContextPrefix starts the context of every commit status kici
// posts. The pipeline ignores status events whose context starts with it,
// so kici's own posts never start a run (a workflow on `status` would
// otherwise feed itself).
const StatusContextPrefix = "kici/"

// statusContext is a job's commit-status context: "kici/<workflow>/<job>".
// An organization-wide workflow's is "kici/<workflow>@<defining repo>/<job>".
func statusContext(run *store.Run, job *store.Job) string {
	if r := originRepo(run); r != "" {
		return StatusContextPrefix + run.WorkflowName + "@" + r + "/" + job.JobName
	}
	return StatusContextPrefix + run.WorkflowName + "/" + job.JobName
}

// detailsURL links a job's page in the web UI, "" without a public URL
// (never a loopback address the forge's users could not open).
func detailsURL(publicURL string, job *store.Job) string {
	if publicURL == "" {
		return ""
	}
	return strings.TrimRight(publicURL, "/") + "/ui/runs/" + job.RunID + "/jobs/" + job.ID
}

// checkRunBody is the GitHub check-run request body for a job (POST
// /repos/{repo}/check-runs; PATCH takes the same fields but head_sha).
func checkRunBody(v *jobView, o outcome, publicURL string) map[string]any {
	j := v.job
	b := map[string]any{
		"name":        checkName(v.run, j),
		"head_sha":    v.run.SHA,
		"external_id": j.ID,
		"status":      o.status,
	}
	if u := detailsURL(publicURL, j); u != "" {
		b["details_url"] = u
	}
	if j.StartedAt != nil && o.status != checkQueued {
		b["started_at"] = j.StartedAt.UTC().Format(time.RFC3339)
	}
	if o.status == checkCompleted {
		b["conclusion"] = o.conclusion
		end := v.now
		if j.CompletedAt != nil {
			end = *j.CompletedAt
		}
		b["completed_at"] = end.UTC().Format(time.RFC3339)
	}
	out := map[string]any{"title": truncate(titleOf(o), 1000), "summary": truncate(summaryOf(v), maxOutputText)}
	if len(v.failLines) > 0 {
		out["text"] = truncate(failText(v), maxOutputText)
	}
	b["output"] = out
	return b
}

// titleOf is the check's one-line title.
func titleOf(o outcome) string {
	s := o.sentence
	if s == "" {
		return o.status
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// summaryOf renders the run's jobs and this job's steps with status and
// duration (a running step's duration is its elapsed time).
func summaryOf(v *jobView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", titleOf(outcomeOf(v)))
	fmt.Fprintf(&b, "Run `%s` of workflow **%s** at `%s`: %s\n\n", v.run.ID, mdCell(v.run.WorkflowName), short(v.run.SHA), v.run.Status)
	if len(v.steps) > 0 {
		b.WriteString("| step | status | duration |\n|---|---|---|\n")
		for _, s := range v.steps {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(s.StepName), s.Status, stepDuration(s))
		}
		b.WriteString("\n")
	}
	if len(v.all) > 1 {
		b.WriteString("| job | status | duration |\n|---|---|---|\n")
		for _, j := range v.all {
			d := "-"
			if j.DurationMs != nil {
				d = dur(*j.DurationMs)
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(j.JobName), j.Status, d)
		}
	}
	return b.String()
}

// stepDuration is a finished step's duration ("-" while it runs: GitHub
// shows the elapsed time itself, and a clock in the body would cost one
// call per Interval for every running job).
func stepDuration(s *store.Step) string {
	if s.DurationMs != nil {
		return dur(*s.DurationMs)
	}
	return "-"
}

// failText is the failing step's last log lines in a fenced block.
func failText(v *jobView) string {
	var b strings.Builder
	state := ""
	if v.live {
		state = " (running)"
	}
	fmt.Fprintf(&b, "Last %d lines of step %q%s:\n\n```\n", len(v.failLines), v.failStep, state)
	for _, l := range v.failLines {
		b.WriteString(strings.ReplaceAll(l, "```", "`\u200b``"))
		b.WriteString("\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// mdCell keeps a table cell on one line and its pipes literal.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// statusBody is the commit-status request body for a job: state, context,
// a description of at most 140 characters cut at a word boundary, and
// target_url when known.
func statusBody(v *jobView, o outcome, publicURL string) map[string]any {
	b := map[string]any{
		"state":       o.state,
		"context":     statusContext(v.run, v.job),
		"description": truncateWords(o.sentence, maxDescription),
	}
	if u := detailsURL(publicURL, v.job); u != "" {
		b["target_url"] = u
	}
	return b
}
