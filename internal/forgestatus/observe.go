package forgestatus

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// openRunStatuses are the run statuses whose jobs may still change.
var openRunStatuses = []status.Run{status.RunPending, status.RunRunning, status.RunCancelling, status.RunHeld}

// observe records, for every job of every run that may have changed since
// the last pass, the state its forge should show: runs not finished yet,
// runs created since the last pass (a run can start and end between two
// passes), and runs with a row whose final state is not recorded yet.
func (r *Reporter) observe(ctx context.Context) {
	now := r.now()
	ids := map[string]*store.Run{}
	var order []string
	add := func(runs []*store.Run) {
		for _, run := range runs {
			if _, ok := ids[run.ID]; !ok {
				ids[run.ID] = run
				order = append(order, run.ID)
			}
		}
	}
	// Only runs of sources with a forge to report to are read: on an
	// install whose runs come from local sources (or whose thousands of
	// parked runs do) a pass costs a source listing, not a scan of every
	// open run each second.
	sources, err := r.reportableSources(ctx)
	if err != nil {
		r.log.Warn("forge status: list sources", "err", err)
		return
	}
	since := r.since
	for _, sourceID := range sources {
		for off := 0; off < 2000; off += 200 {
			runs, _, err := r.st.ListRuns(ctx, store.RunFilter{SourceID: sourceID, Statuses: openRunStatuses, Limit: 200, Offset: off})
			if err != nil {
				r.log.Warn("forge status: list runs", "err", err)
				return
			}
			add(runs)
			if len(runs) < 200 {
				break
			}
		}
		recent, _, err := r.st.ListRuns(ctx, store.RunFilter{SourceID: sourceID, Since: &since, Limit: 500})
		if err != nil {
			r.log.Warn("forge status: list runs", "err", err)
			return
		}
		add(recent)
	}
	r.since = now.Add(-2 * time.Second)
	open, err := r.st.ListCheckRuns(ctx, store.CheckRunFilter{Open: true, Limit: 2000})
	if err != nil {
		r.log.Warn("forge status: list open checks", "err", err)
		return
	}
	rows := map[string]*store.CheckRun{}
	for _, c := range open {
		rows[c.JobID] = c
		if _, ok := ids[c.RunID]; !ok {
			if run, err := r.st.GetRun(ctx, c.RunID); err == nil {
				add([]*store.Run{run})
			}
		}
	}
	for _, id := range order {
		if ctx.Err() != nil {
			return
		}
		r.observeRun(ctx, ids[id], rows, now)
	}
}

// reportableSources returns the ids of the sources whose runs have a forge
// to report to (target, cached per source).
func (r *Reporter) reportableSources(ctx context.Context) ([]string, error) {
	all, err := r.st.ListSources(ctx, "")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, src := range all {
		if _, ok := r.target(ctx, src.ID); ok {
			ids = append(ids, src.ID)
		}
	}
	return ids, nil
}

// observeRun records the desired state of each job of run.
func (r *Reporter) observeRun(ctx context.Context, run *store.Run, open map[string]*store.CheckRun, now time.Time) {
	if run.SourceID == "" || run.SHA == "" || run.RepoIdentifier == "" {
		return
	}
	t, ok := r.target(ctx, run.SourceID)
	if !ok {
		return
	}
	jobs, err := r.st.ListJobs(ctx, run.ID)
	if err != nil {
		r.log.Warn("forge status: list jobs", "runId", run.ID, "err", err)
		return
	}
	var holds []*store.HeldRun
	for _, j := range jobs {
		if j.Status == status.JobHeld {
			holds, _ = r.st.ListHeldRuns(ctx, store.HeldRunFilter{OrgID: run.OrgID, RunID: run.ID, Statuses: []hold.Status{hold.Pending}})
			break
		}
	}
	for _, j := range jobs {
		prev, known := open[j.ID]
		if known && prev.DesiredTerminal && j.Status.IsTerminal() {
			continue // the final state is recorded; it only waits for delivery
		}
		if !known && j.Status.IsTerminal() {
			// A terminal job without an open row either has its final
			// state recorded already, or was never seen: look.
			c, err := r.st.GetCheckRun(ctx, j.ID)
			if err == nil && c.DesiredTerminal {
				r.dropTails(j.ID)
				continue
			}
			prev = c
		}
		v := &jobView{run: run, job: j, all: jobs, now: now, hold: holdOf(holds, j)}
		if j.Status != status.JobPending && j.Status != status.JobQueued && j.Status != status.JobHeld {
			if v.steps, err = r.st.ListSteps(ctx, j.ID); err != nil {
				r.log.Warn("forge status: list steps", "jobId", j.ID, "err", err)
				continue
			}
		}
		r.addLogLines(v)
		o := outcomeOf(v)
		var body map[string]any
		name := statusContext(run, j)
		switch t.provider {
		case store.CheckProviderGitHubChecks:
			body, name = checkRunBody(v, o, r.cfg.PublicURL), checkName(run, j)
		case store.CheckProviderGitLab:
			body = gitlabBody(v, o, r.cfg.PublicURL)
		default:
			body = statusBody(v, o, r.cfg.PublicURL)
		}
		raw, hash := hashOf(body)
		if prev != nil && prev.DesiredHash == hash {
			continue
		}
		state := o.state
		if t.provider == store.CheckProviderGitHubChecks {
			state = o.status
			if o.conclusion != "" {
				state += "/" + o.conclusion
			}
		} else if t.provider == store.CheckProviderGitLab {
			state = gitlabState(j, o)
		}
		c := &store.CheckRun{JobID: j.ID, RunID: run.ID, SourceID: run.SourceID, Provider: t.provider, Repo: run.RepoIdentifier,
			SHA: run.SHA, Name: name, DesiredState: state, DesiredBody: raw, DesiredHash: hash,
			DesiredTerminal: o.terminal && j.Status.IsTerminal(), DesiredAt: now}
		if err := r.st.UpsertCheckRunDesired(ctx, c); err != nil {
			r.log.Warn("forge status: record state", "jobId", j.ID, "err", err)
		}
	}
}

// holdOf is the pending hold that keeps job waiting: its own, else its
// run's workflow-scoped one.
func holdOf(holds []*store.HeldRun, j *store.Job) *store.HeldRun {
	var wf *store.HeldRun
	for _, h := range holds {
		if h.JobID == j.ID {
			return h
		}
		if h.JobID == "" {
			wf = h
		}
	}
	return wf
}

// tail follows one step's stored log: the cursor read so far and the
// last lines.
type tail struct {
	cursor int
	lines  []string
}

// addLogLines fills the last lines of the failing step of a failed job,
// or of the running step of a running job (the check shows live output;
// coalescing keeps that to one call per Interval). Lines are masked as
// stored: the agent masks secrets before they leave it.
func (r *Reporter) addLogLines(v *jobView) {
	if r.cfg.Logs == nil {
		return
	}
	var want status.Step
	switch v.job.Status {
	case status.JobFailed:
		want = status.StepFailed
	case status.JobRunning:
		want, v.live = status.StepRunning, true
	default:
		return
	}
	for _, s := range v.steps {
		if s.Status == want {
			v.failStep = s.StepName
			v.failLines = r.lastLines(v.job.RunID, v.job.ID, s.StepIndex)
			return
		}
	}
}

// lastLines reads a step's log from where it was read last and returns
// its last failLines lines.
func (r *Reporter) lastLines(runID, jobID string, step int) []string {
	key := fmt.Sprintf("%s/%d", jobID, step)
	r.mu.Lock()
	tl := r.tails[key]
	if tl == nil {
		tl = &tail{}
		r.tails[key] = tl
	}
	r.mu.Unlock()
	for range 1000 {
		lines, next, err := r.cfg.Logs.Read(runID, jobID, step, tl.cursor, 10000)
		if err != nil {
			r.log.Warn("forge status: read log", "jobId", jobID, "step", step, "err", err)
			break
		}
		for _, l := range lines {
			tl.lines = append(tl.lines, printableLine(l.Text))
		}
		if len(tl.lines) > failLines {
			tl.lines = append([]string(nil), tl.lines[len(tl.lines)-failLines:]...)
		}
		if next == tl.cursor || len(lines) == 0 {
			break
		}
		tl.cursor = next
	}
	return append([]string(nil), tl.lines...)
}

// dropTails forgets the log tails of a job whose final state is recorded.
func (r *Reporter) dropTails(jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.tails {
		if strings.HasPrefix(k, jobID+"/") {
			delete(r.tails, k)
		}
	}
}

// escapeRE matches a terminal escape sequence (ECMA-48): a CSI sequence
// (ESC [ or the 8-bit CSI, parameters, intermediates, final byte, e.g.
// colours "\x1b[31m" and cursor moves), an OSC/DCS/PM/APC string ended by
// BEL or ST (window titles, hyperlinks), or a two-byte ESC sequence.
var escapeRE = regexp.MustCompile(`(?:\x1b\[|\x{9b})[0-?]*[ -/]*[@-~]|\x1b[\]P^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]`)

// printableLine drops terminal escape sequences whole (a check run's text
// is Markdown, where "\x1b[31m" would show as "[31m"), then every other
// control character, and caps a line at 500 bytes.
func printableLine(s string) string {
	s = escapeRE.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		if r != '\t' && unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	return truncate(s, 500)
}
