package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/store"
)

// runsPageSize is the number of runs on one page of the runs list.
const runsPageSize = 25

// runStatuses and triggerTypes are the choices of the runs filters.
var (
	runStatuses  = status.Strings([]status.Run{status.RunPending, status.RunRunning, status.RunHeld, status.RunCancelling, status.RunSuccess, status.RunFailed, status.RunCancelled})
	triggerTypes = []string{"push", "pull_request", "tag", "manual", "schedule", "event", "lifecycle"}
)

type runsData struct {
	Runs                             []*store.Run
	Total, Offset, Limit             int
	PrevURL, NextURL                 string
	Status, Source, Branch, Workflow string
	Trigger                          string
	Statuses, Triggers               []string
	Sources                          []*store.Source
	SourceNames                      map[string]string
	First, Last                      int
	// Info is what each run's delivery says, by run id: the commit's
	// title (or the pull request's) and who triggered it.
	Info map[string]runListInfo
}

// runListInfo is one row's commit title and actor.
type runListInfo struct {
	Title, Actor string
}

func (u *UI) runsPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if !u.require(w, r, p, auth.PermRunRead, false) {
		return
	}
	q := r.URL.Query()
	d := runsData{Status: q.Get("status"), Source: q.Get("source"), Branch: q.Get("branch"),
		Workflow: q.Get("workflow"), Trigger: q.Get("trigger"), Statuses: runStatuses, Triggers: triggerTypes,
		Limit: runsPageSize, SourceNames: map[string]string{}}
	f := store.RunFilter{WorkflowName: d.Workflow, SourceID: d.Source, Branch: d.Branch, TriggerType: apitypes.TriggerKind(d.Trigger),
		RoutingKey: p.RoutingKey, Limit: runsPageSize}
	if d.Status != "" {
		f.Statuses = []status.Run{status.Run(d.Status)}
	}
	d.Offset, _ = strconv.Atoi(q.Get("offset"))
	d.Offset = max(d.Offset, 0)
	f.Offset = d.Offset
	runs, total, err := u.d.Store.ListRuns(r.Context(), f)
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	d.Runs, d.Total = runs, total
	d.Info = map[string]runListInfo{}
	facts := u.newDeliveryFacts()
	for _, run := range runs {
		f := facts.get(r.Context(), run.DeliveryID)
		in := runListInfo{Title: commitTitle(f.Commit.Message), Actor: f.Commit.Actor}
		if f.Pull.Title != "" {
			in.Title = truncate(90, f.Pull.Title)
		}
		if in.Actor == "" {
			in.Actor = run.TriggeredBy
		}
		d.Info[run.ID] = in
	}
	if srcs, err := u.visibleSources(r, p); err == nil {
		d.Sources = srcs
		for _, src := range srcs {
			d.SourceNames[src.ID] = src.Name
		}
	}
	page := func(off int) string {
		v := url.Values{}
		for _, k := range []string{"status", "source", "branch", "workflow", "trigger"} {
			if q.Get(k) != "" {
				v.Set(k, q.Get(k))
			}
		}
		if off > 0 {
			v.Set("offset", strconv.Itoa(off))
		}
		return "/ui/runs?" + v.Encode()
	}
	if d.Offset > 0 {
		d.PrevURL = page(max(d.Offset-runsPageSize, 0))
	}
	if d.Offset+len(runs) < total {
		d.NextURL = page(d.Offset + runsPageSize)
	}
	if len(runs) > 0 {
		d.First, d.Last = d.Offset+1, d.Offset+len(runs)
	}
	u.render(w, r, http.StatusOK, "runs", view{Title: "Runs", Nav: "runs", Who: p, CSRF: s.csrf, Live: "refresh", Data: d})
}

// visibleSources lists the sources p may see (a scoped caller: its own).
func (u *UI) visibleSources(r *http.Request, p auth.Principal) ([]*store.Source, error) {
	all, err := u.d.Store.ListSources(r.Context(), "")
	if err != nil || p.RoutingKey == "" {
		return all, err
	}
	var out []*store.Source
	for _, s := range all {
		if s.RoutingKey == p.RoutingKey {
			out = append(out, s)
		}
	}
	return out, nil
}

type runData struct {
	Run       *store.Run
	Jobs      []*store.Job
	Graph     needsGraph
	Holds     []*store.HeldRun
	HoldByJob map[string]string
	Trace     *ingest.Trace
	Decision  any
	Commit    commitInfo
	// Pull is the pull request the run was made for (zero for a push).
	Pull   pullInfo
	Source string
	// ParentRun is the run this rerun repeats ("" for a first run);
	// Reruns are the runs that repeat this one, oldest first.
	ParentRun string
	Reruns    []string
	CanCancel bool
	CanRerun  bool
	// CanRerunFailed offers "Re-run failed jobs" on a failed run.
	CanRerunFailed bool
	// CanDecide shows approve and reject on the run's pending holds: the
	// caller may decide them (ci_trust.admin, or a reviewer a hold names)
	// and decisions are made here, not on the KiCI Platform.
	CanDecide bool
	// Platform is the mode when held runs are decided on the KiCI
	// Platform ("" otherwise).
	Platform config.Mode
	Terminal bool
	// Artifacts are the run's unexpired artifacts (caches-and-artifacts.md).
	Artifacts []*store.Artifact
	// Warnings are what the pipeline noted for this run's workflow when
	// it created the run (library drift: ingest.Trace.Warnings).
	Warnings []string
	// Notifications are the run's notification deliveries
	// (notifications.go; none for a scoped caller).
	Notifications []*store.NotificationDelivery
}

// commitInfo is what a delivery's payload says about the commit and who
// triggered it (GitHub push and pull_request shapes; other forges' and
// generic payloads often use the same names).
type commitInfo struct {
	Message, Author, Actor, URL string
}

func (u *UI) runPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	run, ok := u.loadRun(w, r, p, auth.PermRunRead)
	if !ok {
		return
	}
	d, err := u.runDetails(r, p, run)
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	live := ""
	if !d.Terminal {
		live = "run"
	}
	u.render(w, r, http.StatusOK, "run", view{Title: run.WorkflowName + " · run", Nav: "runs", Who: p, CSRF: s.csrf,
		Live: live, LiveURL: "/api/v1/admin/runs/" + url.PathEscape(run.ID) + "/events", Data: d})
}

func (u *UI) runDetails(r *http.Request, p auth.Principal, run *store.Run) (*runData, error) {
	ctx := r.Context()
	jobs, err := u.d.Store.ListJobs(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	d := &runData{Run: run, Jobs: jobs, Graph: layoutGraph(run.ID, jobs), HoldByJob: map[string]string{},
		Terminal: run.Status.IsTerminal()}
	d.CanCancel = !d.Terminal && u.d.Cancel != nil && can(p, auth.PermRunCancel)
	d.CanRerun = d.Terminal && u.d.Rerun != nil && can(p, auth.PermRunRerun)
	d.CanRerunFailed = d.CanRerun && run.Status == status.RunFailed
	holds, err := u.d.Store.ListHeldRuns(ctx, store.HeldRunFilter{RunID: run.ID, Statuses: []hold.Status{hold.Pending}, Limit: 200})
	if err != nil {
		return nil, err
	}
	d.Holds = holds
	operator := can(p, auth.PermCITrustAdmin) && p.RoutingKey == ""
	d.CanDecide = len(holds) > 0 && u.d.Approval != nil && !platformConnected(u.d.Mode) &&
		(operator || (can(p, auth.PermCITrustRead) && namesReviewer(holds, p.Person)))
	if platformConnected(u.d.Mode) {
		d.Platform = u.d.Mode
	}
	if l, err := u.d.Store.GetRunLink(ctx, run.ID); err == nil {
		d.ParentRun = l.ParentRunID
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	kids, err := u.d.Store.ListRerunsOf(ctx, run.ID, 50)
	if err != nil {
		return nil, err
	}
	for _, k := range kids {
		d.Reruns = append(d.Reruns, k.RunID)
	}
	arts, err := u.d.Store.ListArtifacts(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	for _, a := range arts {
		if a.ExpiresAt.After(time.Now()) {
			d.Artifacts = append(d.Artifacts, a)
		}
	}
	for _, h := range holds {
		if h.JobID != "" {
			d.HoldByJob[h.JobID] = string(h.Reason)
		}
	}
	d.Notifications = u.runNotifications(r, p, run.ID)
	if run.SourceID != "" {
		if src, err := u.d.Store.GetSource(ctx, run.SourceID); err == nil {
			d.Source = src.Name
		}
	}
	if run.DeliveryID != "" {
		del, err := u.d.Store.GetDelivery(ctx, run.DeliveryID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if del != nil {
			d.Commit = commitFromPayload(del.Payload)
			d.Pull = pullFromPayload(del.Payload)
			var tr ingest.Trace
			if len(del.Decisions) > 0 && json.Unmarshal(del.Decisions, &tr) == nil {
				d.Trace = &tr
				for i := range tr.Workflows {
					if tr.Workflows[i].Name == run.WorkflowName {
						d.Decision = tr.Workflows[i]
					}
				}
				prefix := fmt.Sprintf("workflow %q: ", run.WorkflowName)
				for _, w := range tr.Warnings {
					if rest, ok := strings.CutPrefix(w, prefix); ok {
						d.Warnings = append(d.Warnings, rest)
					}
				}
			}
		}
	}
	if d.Commit.Actor == "" {
		d.Commit.Actor = run.TriggeredBy
	}
	return d, nil
}

// commitFromPayload reads the commit message, its author, the actor and
// the commit URL from a webhook body; unknown shapes give zero values.
func commitFromPayload(body json.RawMessage) commitInfo {
	var pl struct {
		HeadCommit *struct {
			Message string `json:"message"`
			URL     string `json:"url"`
			Author  struct {
				Name string `json:"name"`
			} `json:"author"`
		} `json:"head_commit"`
		PullRequest *struct {
			Title   string `json:"title"`
			HTMLURL string `json:"html_url"`
			User    struct {
				Login string `json:"login"`
			} `json:"user"`
		} `json:"pull_request"`
		Sender struct {
			Login string `json:"login"`
		} `json:"sender"`
		Pusher struct {
			Name string `json:"name"`
		} `json:"pusher"`
		Message string `json:"message"`
	}
	var c commitInfo
	if json.Unmarshal(body, &pl) != nil {
		return c
	}
	switch {
	case pl.HeadCommit != nil:
		c.Message, c.URL, c.Author = pl.HeadCommit.Message, pl.HeadCommit.URL, pl.HeadCommit.Author.Name
	case pl.PullRequest != nil:
		c.Message, c.URL, c.Author = pl.PullRequest.Title, pl.PullRequest.HTMLURL, pl.PullRequest.User.Login
	default:
		c.Message = pl.Message
	}
	c.Actor = pl.Sender.Login
	if c.Actor == "" {
		c.Actor = pl.Pusher.Name
	}
	// Only web links are kept: a javascript: or data: URL from a payload
	// must never become a link.
	if !strings.HasPrefix(c.URL, "https://") && !strings.HasPrefix(c.URL, "http://") {
		c.URL = ""
	}
	return c
}

// actor names the caller in run records, as the admin API does: the
// token's label, else "admin".
func actor(p auth.Principal) string {
	if p.Person != "" {
		return p.Person
	}
	if p.Label == "" {
		return "admin"
	}
	return p.Label
}

// runActionTarget loads the run a run page's POST acts on, which the caller
// needs perm for, once the service the action needs is wired (else 503
// with unavailable).
func (u *UI) runActionTarget(w http.ResponseWriter, r *http.Request, p auth.Principal, perm auth.Permission, wired bool, unavailable string) (*store.Run, bool) {
	run, ok := u.loadRun(w, r, p, perm)
	if !ok {
		return nil, false
	}
	if !wired {
		u.errorPage(w, r, http.StatusServiceUnavailable, unavailable)
		return nil, false
	}
	return run, true
}

// auditRunAction records a run page's action as the admin API route it
// stands for (POST /api/v1/admin/runs/{runId}/<action>).
func (u *UI) auditRunAction(r *http.Request, p auth.Principal, runID, action string) {
	u.audit(r, p, "POST /api/v1/admin/runs/{runId}/"+action, "/api/v1/admin/runs/"+runID+"/"+action)
}

func (u *UI) cancelRun(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	run, ok := u.runActionTarget(w, r, p, auth.PermRunCancel, u.d.Cancel != nil, "Run control not available")
	if !ok {
		return
	}
	_, err := u.d.Cancel.CancelRun(r.Context(), run.ID, r.PostFormValue("force") == "true", actor(p))
	switch {
	case errors.Is(err, runctl.ErrRunNotFound):
		u.errorPage(w, r, http.StatusNotFound, "Run not found")
		return
	case errors.Is(err, runctl.ErrRunTerminal):
		u.errorPage(w, r, http.StatusConflict, "Run already finished")
		return
	case err != nil:
		u.internalError(w, r, err)
		return
	}
	u.auditRunAction(r, p, run.ID, "cancel")
	http.Redirect(w, r, "/ui/runs/"+url.PathEscape(run.ID)+"?flash=cancelled", http.StatusSeeOther)
}

func (u *UI) rerunRun(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	run, ok := u.runActionTarget(w, r, p, auth.PermRunRerun, u.d.Rerun != nil, "Reruns are not available")
	if !ok {
		return
	}
	rerun := u.d.Rerun.Rerun
	if r.PostFormValue("failed") == "true" {
		// Like POST /runs/{runId}/rerun?failed=true: the jobs that did not
		// succeed and their dependents run again, the others are carried.
		rerun = u.d.Rerun.RerunFailed
	}
	nr, err := rerun(r.Context(), run.ID, actor(p))
	switch {
	case errors.Is(err, ingest.ErrRunNotFound):
		u.errorPage(w, r, http.StatusNotFound, "Run not found")
		return
	case errors.Is(err, ingest.ErrRunNotFinished):
		u.errorPage(w, r, http.StatusConflict, "Run is not finished yet")
		return
	case errors.Is(err, ingest.ErrRerunUnavailable):
		u.errorPage(w, r, http.StatusConflict, err.Error())
		return
	case err != nil:
		u.internalError(w, r, err)
		return
	}
	u.auditRunAction(r, p, run.ID, "rerun")
	http.Redirect(w, r, "/ui/runs/"+url.PathEscape(nr.ID)+"?flash=rerun", http.StatusSeeOther)
}
