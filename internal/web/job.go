package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// Log paging: a page shows logPageSize lines, so a log of a million lines
// is read one page at a time, never whole; a search lists at most
// maxSearchHits matches.
const (
	logPageSize   = 1000
	maxSearchHits = 500
)

// stepRow is one entry of a job's step list: the setup bucket (-1) or a
// step of the lock config, with its reported state.
type stepRow struct {
	Index    int
	Name     string
	Status   status.Step
	Dur      string
	Exit     *int
	Error    string
	Href     string
	Selected bool
	// Since is when a running step started (RFC 3339, UTC) and Elapsed
	// how long ago that was when the page was made; live.js counts on
	// from Since. Both "" unless the step is running.
	Since, Elapsed string
}

type logLine struct {
	N      int // 1-based line number
	Stream protocol.LogStream
	HTML   any
	// TS is when the line was logged (UTC, "15:04:05.000"), set only
	// when the page shows timestamps; Stamp is the full time (tooltip).
	TS, Stamp string
}

// searchHit is one matching line: its number, its text rendered as the
// log renders it (colours as classes, other escapes dropped) and a link to
// it on its page.
type searchHit struct {
	N    int
	HTML any
	Href string
}

type jobData struct {
	Run   *store.Run
	Job   *store.Job
	Steps []stepRow
	Step  int
	// Lines is the page shown; From its first 0-based offset.
	Lines            []logLine
	From             int
	PrevURL, NextURL string
	// FirstURL and LastURL open the first and the last page of a log
	// longer than a page ("" when the page shown is that page).
	FirstURL, LastURL string
	// Total is the number of lines of the step's log (-1 when the log
	// store cannot count them).
	Total int
	// Stamps shows each line's time (?ts=1); StampsURL toggles it.
	Stamps    bool
	StampsURL string
	// JobSince and JobElapsed are the running job's start (RFC 3339) and
	// elapsed time, "" unless the job is running.
	JobSince, JobElapsed string
	RawURL               string
	StreamURL            string
	Tail                 bool
	Query                string
	Hits                 []searchHit
	HitsCapped           bool
	Hold                 string
	// Outputs are the values the job exported; Artifacts what it uploaded.
	Outputs   map[string]string
	Artifacts []artifactRow
}

// artifactRow is one artifact of the job with its download link (the
// admin API's download route, which the session cookie may read).
type artifactRow struct {
	*store.Artifact
	Href string
}

func (u *UI) jobPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	run, job, ok := u.loadRunJob(w, r, p)
	if !ok {
		return
	}
	ctx := r.Context()
	q := r.URL.Query()
	steps, err := u.d.Store.ListSteps(ctx, job.ID)
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	base := "/ui/runs/" + url.PathEscape(run.ID) + "/jobs/" + url.PathEscape(job.ID)
	rows := stepRows(job, steps, base, u.d.Now())
	sel := defaultStep(rows)
	if v := q.Get("step"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= protocol.ContainerBuildStepIndex {
			sel = n
		}
	}
	if !hasStep(rows, sel) {
		u.errorPage(w, r, http.StatusNotFound, "Step not found")
		return
	}
	for i := range rows {
		rows[i].Selected = rows[i].Index == sel
	}
	d := jobData{Run: run, Job: job, Steps: rows, Step: sel, Query: q.Get("q"),
		RawURL: fmt.Sprintf("%s/steps/%d/raw", base, sel), Stamps: q.Get("ts") == "1", Total: -1}
	if job.Status == status.JobRunning && job.StartedAt != nil {
		d.JobSince, d.JobElapsed = job.StartedAt.UTC().Format(time.RFC3339), fmtElapsed(u.d.Now().Sub(*job.StartedAt))
	}
	if holds, err := u.d.Store.ListHeldRuns(ctx, store.HeldRunFilter{JobID: job.ID, Statuses: []hold.Status{hold.Pending}, Limit: 10}); err == nil && len(holds) > 0 {
		d.Hold = string(holds[0].Reason)
	}
	stepURL := func(from int) string {
		v := url.Values{"step": {strconv.Itoa(sel)}}
		if from > 0 {
			v.Set("from", strconv.Itoa(from))
		}
		if d.Stamps {
			v.Set("ts", "1")
		}
		return base + "?" + v.Encode()
	}
	// ?line=N opens the page holding line N at its anchor.
	if v := q.Get("line"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			http.Redirect(w, r, stepURL((n-1)/logPageSize*logPageSize)+"#L"+strconv.Itoa(n), http.StatusSeeOther)
			return
		}
	}
	if d.Query != "" {
		err := u.d.Logs.Scan(run.ID, job.ID, sel, 0, func(n int, l protocol.LogLine) bool {
			if !strings.Contains(strings.ToLower(l.Text), strings.ToLower(d.Query)) {
				return true
			}
			if len(d.Hits) == maxSearchHits {
				d.HitsCapped = true
				return false
			}
			d.Hits = append(d.Hits, searchHit{N: n + 1, HTML: renderANSI(truncate(300, l.Text)),
				Href: stepURL(n/logPageSize*logPageSize) + "#L" + strconv.Itoa(n+1)})
			return true
		})
		if err != nil && !isMissingLog(err) {
			u.internalError(w, r, err)
			return
		}
	}
	d.From, _ = strconv.Atoi(q.Get("from"))
	d.From = max(d.From, 0)
	// One line more than a page tells whether a next page exists.
	lines, _, err := u.d.Logs.Read(run.ID, job.ID, sel, d.From, logPageSize+1)
	if err != nil && !isMissingLog(err) {
		u.internalError(w, r, err)
		return
	}
	more := len(lines) > logPageSize
	if more {
		lines = lines[:logPageSize]
	}
	for i, l := range lines {
		ll := logLine{N: d.From + i + 1, Stream: l.Stream, HTML: renderANSI(l.Text)}
		if d.Stamps && l.Timestamp > 0 {
			t := time.UnixMilli(l.Timestamp).UTC()
			ll.TS, ll.Stamp = t.Format("15:04:05.000"), t.Format(time.RFC3339Nano)
		}
		d.Lines = append(d.Lines, ll)
	}
	if lc, ok := u.d.Logs.(lineCounter); ok {
		if n, err := lc.Lines(run.ID, job.ID, sel); err == nil {
			d.Total = n
		}
	}
	if d.From > 0 {
		d.PrevURL = stepURL(max(d.From-logPageSize, 0))
		d.FirstURL = stepURL(0)
	}
	if more {
		d.NextURL = stepURL(d.From + logPageSize)
		if d.Total > 0 {
			d.LastURL = stepURL((d.Total - 1) / logPageSize * logPageSize)
		}
	}
	{
		v := url.Values{"step": {strconv.Itoa(sel)}}
		if d.From > 0 {
			v.Set("from", strconv.Itoa(d.From))
		}
		if !d.Stamps {
			v.Set("ts", "1")
		}
		d.StampsURL = base + "?" + v.Encode()
	}
	finished := job.Status.IsTerminal()
	for _, row := range rows {
		if row.Index == sel && row.Status.IsTerminal() {
			finished = true
		}
	}
	// The live tail follows the end of the log: it runs on the last page
	// while the step can still grow.
	d.Tail = !finished && !more
	d.StreamURL = fmt.Sprintf("/api/v1/admin/runs/%s/jobs/%s/steps/%d/logs/stream?cursor=%d",
		url.PathEscape(run.ID), url.PathEscape(job.ID), sel, d.From+len(d.Lines))
	if outs, err := u.d.Store.ListJobOutputs(ctx, run.ID); err == nil {
		d.Outputs = outs[job.ID]
	}
	if arts, err := u.d.Store.ListArtifacts(ctx, run.ID); err == nil {
		for _, a := range arts {
			if a.JobID == job.ID {
				d.Artifacts = append(d.Artifacts, artifactRow{Artifact: a,
					Href: "/api/v1/admin/runs/" + url.PathEscape(run.ID) + "/artifacts/" + url.PathEscape(a.Name)})
			}
		}
	}
	// A page opened without ?step follows the job: live.js opens it again
	// when the tailed step ends, and while the job runs with no step
	// running (between two steps) it looks again shortly ("await-step").
	live := ""
	switch {
	case d.Tail:
		live = "tail"
	case !q.Has("step") && job.Status == status.JobRunning:
		live = "await-step"
	}
	u.render(w, r, http.StatusOK, "job", view{Title: job.JobName + " · job", Nav: "runs", Who: p, CSRF: s.csrf,
		Live: live, LiveURL: d.StreamURL, Data: d})
}

// lineCounter is the log stores' line count (logstore.FS and PG): the
// pages use it for "of N lines" and the last page's link when present.
type lineCounter interface {
	Lines(runID, jobID string, stepIndex int) (int, error)
}

// fmtElapsed formats a running time to the second: "42s", "3m 05s",
// "1h 02m" (what live.js counts on from).
func fmtElapsed(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
}

func isMissingLog(err error) bool {
	return err != nil && strings.Contains(err.Error(), logstore.ErrInvalidPath.Error())
}

// stepRows lists the setup bucket, the container image build (a job whose
// container is built from a Dockerfile) and every step of the job's lock
// config, with the state the agent reported.
func stepRows(job *store.Job, steps []*store.Step, base string, now time.Time) []stepRow {
	var cfg struct {
		Steps []struct {
			Name string `json:"name"`
		} `json:"steps"`
		Container *struct {
			Build json.RawMessage `json:"build"`
		} `json:"container"`
	}
	_ = json.Unmarshal(job.Config, &cfg)
	byIdx := map[int]*store.Step{}
	for _, s := range steps {
		byIdx[s.StepIndex] = s
	}
	n := len(cfg.Steps)
	for _, s := range steps {
		n = max(n, s.StepIndex+1)
	}
	rows := []stepRow{{Index: -1, Name: "Set up job", Status: setupStatus(job, steps)}}
	// An image built from the repository's Dockerfile is a step of its
	// own, after the setup and before the job's steps.
	if b := byIdx[protocol.ContainerBuildStepIndex]; b != nil || cfg.Container != nil && len(cfg.Container.Build) > 0 && string(cfg.Container.Build) != "null" {
		row := stepRow{Index: protocol.ContainerBuildStepIndex, Name: protocol.ContainerBuildStepName, Status: status.StepPending}
		if b != nil {
			row.Status, row.Error, row.Dur = b.Status, b.ErrorMessage, fmtDurPtr(b.DurationMs)
		} else if job.Status.IsTerminal() {
			row.Status = status.StepSkipped
		}
		rows = append(rows, row)
	}
	for i := 0; i < n; i++ {
		row := stepRow{Index: i, Name: fmt.Sprintf("step %d", i), Status: status.StepPending}
		if i < len(cfg.Steps) && cfg.Steps[i].Name != "" {
			row.Name = cfg.Steps[i].Name
		}
		if s := byIdx[i]; s != nil {
			if s.StepName != "" {
				row.Name = s.StepName
			}
			row.Status, row.Exit, row.Error = s.Status, s.ExitCode, s.ErrorMessage
			row.Dur = fmtDurPtr(s.DurationMs)
			if s.Status == status.StepRunning && s.StartedAt != nil {
				row.Since, row.Elapsed = s.StartedAt.UTC().Format(time.RFC3339), fmtElapsed(now.Sub(*s.StartedAt))
			}
		}
		rows = append(rows, row)
	}
	for i := range rows {
		rows[i].Href = fmt.Sprintf("%s?step=%d", base, rows[i].Index)
	}
	return rows
}

// hasStep reports whether idx names a row of the job's step list, so a
// made-up step index answers 404 instead of an empty log.
func hasStep(rows []stepRow, idx int) bool {
	for _, r := range rows {
		if r.Index == idx {
			return true
		}
	}
	return false
}

// setupStatus is the state of the job's setup bucket: pending before the
// job starts, running until its first step reports, then finished (the
// agent sets up before it runs any step).
func setupStatus(job *store.Job, steps []*store.Step) status.Step {
	switch {
	case job.StartedAt == nil && !job.Status.IsTerminal():
		return status.StepPending
	}
	for _, s := range steps {
		if s.Status != status.StepPending {
			return status.StepSuccess
		}
	}
	switch job.Status {
	case status.JobFailed, status.JobTimedOutStale:
		// Ended before any step started: the setup is what failed.
		return status.StepFailed
	}
	if job.Status.IsTerminal() {
		return status.StepSuccess
	}
	return status.StepRunning
}

// defaultStep picks the step to show first: the running one, else the
// first failed one, else the last step that reported.
func defaultStep(rows []stepRow) int {
	last := -1
	for _, r := range rows {
		if s := r.Status; s == status.StepRunning || s == status.StepFailed {
			return r.Index
		}
		if r.Status != status.StepPending {
			last = r.Index
		}
	}
	return last
}

// rawLog serves a step's log as plain text (one line per log line, as
// logged), as a download: the browser never renders it as a page.
func (u *UI) rawLog(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	run, job, ok := u.loadRunJob(w, r, p)
	if !ok {
		return
	}
	idx, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || idx < protocol.ContainerBuildStepIndex {
		u.errorPage(w, r, http.StatusBadRequest, "Invalid step index")
		return
	}
	steps, err := u.d.Store.ListSteps(r.Context(), job.ID)
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	if !hasStep(stepRows(job, steps, "", u.d.Now()), idx) {
		u.errorPage(w, r, http.StatusNotFound, "Step not found")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s-step%d.log"`, cssWord(run.ID), cssWord(job.ID), idx))
	bw := &strings.Builder{}
	flushEvery := 64 << 10
	err = u.d.Logs.Scan(run.ID, job.ID, idx, 0, func(n int, l protocol.LogLine) bool {
		bw.WriteString(l.Text)
		bw.WriteByte('\n')
		if bw.Len() >= flushEvery {
			if _, err := w.Write([]byte(bw.String())); err != nil {
				return false
			}
			bw.Reset()
		}
		return true
	})
	if err != nil {
		u.log.Error("web: raw log", "run", run.ID, "job", job.ID, "error", err)
	}
	_, _ = w.Write([]byte(bw.String()))
}
