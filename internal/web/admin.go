package web

import (
	"errors"
	"net/http"
	"net/url"
	"sort"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/store"
)

// maxComment caps a decision's comment (the admin API's reason limit).
const maxComment = 1024

// platformConnected reports whether mode leaves held-run decisions to the
// KiCI Platform (platform, hybrid, observed).
func platformConnected(mode config.Mode) bool { return mode.PlatformConnected() }

type heldRow struct {
	Hold    *store.HeldRun
	JobName string
	Run     *store.Run
	// Pull is the pull request the run was made for (zero for a push):
	// its author, the fork it comes from and links to it and its diff.
	Pull pullInfo
	// Actor is who triggered the run (the delivery's sender, else the
	// run's triggeredBy).
	Actor string
}

type heldData struct {
	Rows      []heldRow
	CanDecide bool
	Platform  config.Mode
}

// heldPage lists pending holds, as GET /held-runs does (ci_trust.read, an
// unscoped token), with approve and reject for ci_trust.admin.
func (u *UI) heldPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if !u.require(w, r, p, auth.PermCITrustRead, true) {
		return
	}
	ctx := r.Context()
	holds, err := u.d.Store.ListHeldRuns(ctx, store.HeldRunFilter{Statuses: []hold.Status{hold.Pending}, Limit: 500})
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	d := heldData{CanDecide: (can(p, auth.PermCITrustAdmin) || namesReviewer(holds, p.Person)) && u.d.Approval != nil && !platformConnected(u.d.Mode)}
	if platformConnected(u.d.Mode) {
		d.Platform = u.d.Mode
	}
	facts := u.newDeliveryFacts()
	for _, h := range holds {
		row := heldRow{Hold: h}
		if h.JobID != "" {
			if j, err := u.d.Store.GetJob(ctx, h.JobID); err == nil {
				row.JobName = j.JobName
			}
		}
		if run, err := u.d.Store.GetRun(ctx, h.RunID); err == nil {
			row.Run = run
			f := facts.get(ctx, run.DeliveryID)
			row.Pull, row.Actor = f.Pull, f.Commit.Actor
			if row.Actor == "" {
				row.Actor = run.TriggeredBy
			}
		}
		d.Rows = append(d.Rows, row)
	}
	if err := u.d.Store.AppendAccessLog(ctx, &store.AccessLogEntry{TokenID: p.TokenID, TokenLabel: p.Label, Role: string(p.Role),
		Action: "held_run.list.read", Resource: "held_runs:*", Detail: "via web UI"}); err != nil {
		u.internalError(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "held", view{Title: "Held runs", Nav: "held", Who: p, CSRF: s.csrf, Live: "refresh", Data: d})
}

// decideHold approves or rejects a hold through the same decider as POST
// /held-runs/decision. A caller holding ci_trust.admin (unscoped) decides
// as an operator, recorded as the person's identity or
// "service:<token id>". A signed-in person without it decides as
// themselves: the decider lets them approve only a hold whose clauses
// name their identity (a context's requiredReviewers), or a security hold
// when the approval directory gives them CI trust write.
func (u *UI) decideHold(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	operator := can(p, auth.PermCITrustAdmin) && p.RoutingKey == ""
	if !operator && (p.Person == "" || !can(p, auth.PermCITrustRead)) {
		u.require(w, r, p, auth.PermCITrustAdmin, true)
		return
	}
	if platformConnected(u.d.Mode) {
		u.errorPage(w, r, http.StatusConflict, "Held runs are decided on the KiCI Platform in "+string(u.d.Mode)+" mode")
		return
	}
	if u.d.Approval == nil {
		u.errorPage(w, r, http.StatusServiceUnavailable, "Held-run decisions are not available on this orchestrator")
		return
	}
	decision := approval.DecisionWord(r.PostFormValue("decision"))
	comment := r.PostFormValue("comment")
	if decision != approval.Approve && decision != approval.Reject {
		u.errorPage(w, r, http.StatusBadRequest, approval.ErrBadDecision.Error())
		return
	}
	if len(comment) > maxComment {
		u.errorPage(w, r, http.StatusBadRequest, "The comment is at most 1024 bytes")
		return
	}
	h, err := u.d.Store.GetHeldRun(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		u.errorPage(w, r, http.StatusNotFound, "Held run not found")
		return
	} else if err != nil {
		u.internalError(w, r, err)
		return
	}
	if p.RoutingKey != "" {
		if ok, err := auth.RunInScope(r.Context(), u.d.Store, h.RunID, p.RoutingKey); err != nil {
			u.internalError(w, r, err)
			return
		} else if !ok {
			u.errorPage(w, r, http.StatusNotFound, "Held run not found")
			return
		}
	}
	_, err = u.d.Approval.Decide(r.Context(), approval.Decision{OrgID: h.OrgID, HeldRunID: h.ID, Decision: decision,
		Reason: comment, Approver: p.Approver(), Operator: operator,
		ActorTokenID: p.TokenID, ActorTokenLabel: p.Label, ActorRole: string(p.Role)})
	switch {
	case errors.Is(err, approval.ErrNotFound):
		u.errorPage(w, r, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, approval.ErrIneligible):
		u.errorPage(w, r, http.StatusConflict, err.Error())
		return
	case errors.Is(err, approval.ErrBadDecision):
		u.errorPage(w, r, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		u.internalError(w, r, err)
		return
	}
	flash := "approved"
	if decision == approval.Reject {
		flash = "rejected"
	}
	dest := "/ui/held?flash=" + flash
	if r.PostFormValue("back") == "run" {
		dest = "/ui/runs/" + url.PathEscape(h.RunID) + "?flash=" + flash
	}
	http.Redirect(w, r, dest, http.StatusSeeOther)
}

type sourceRow struct {
	Source *store.Source
	// Forge names what sends the source's deliveries (providerLabel).
	Forge string
	// OrgWideDenied: the operator keeps the org's organization-wide
	// workflows from running for this source (SourceSettings).
	OrgWideDenied bool
	Events        []*store.EventLogEntry
	Rejected      []*store.RejectedDelivery
}

// presetForges names the forge of each universal-git preset: a generic
// source with a gitConfig receives that forge's own webhooks.
var presetForges = map[string]string{
	"gitea": "Gitea", "forgejo": "Forgejo", "gogs": "Gogs",
	"gitlab-repo": "GitLab", "github-repo": "GitHub (git)", "custom": "git forge (custom preset)",
}

// providerLabel is the Provider line of the Sources page: the forge for a
// universal-git source (stored as provider "generic" with a git preset),
// else the provider type by its name.
func providerLabel(src *store.Source, set *store.SourceSettings) string {
	if set != nil && set.Git != nil {
		if f, ok := presetForges[set.Git.Preset]; ok {
			return f
		}
	}
	switch src.Provider {
	case provider.GitHub:
		return "GitHub"
	case provider.Local:
		return "local git repository"
	case provider.Generic:
		return "generic webhook"
	}
	return string(src.Provider)
}

// sourcesPage lists the sources the caller may see (source.read; a scoped
// token sees its own), each with its last deliveries from the event log
// (event_log.read) and its last rejected requests.
func (u *UI) sourcesPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if !u.require(w, r, p, auth.PermSourceRead, false) {
		return
	}
	srcs, err := u.visibleSources(r, p)
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	// The event log and rejected deliveries are orchestrator-wide routes
	// in the API: a scoped token does not read them there, nor here.
	withLog := can(p, auth.PermEventLogRead) && p.RoutingKey == ""
	var rows []sourceRow
	for _, src := range srcs {
		set, err := u.d.Store.GetSourceSettings(r.Context(), src.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			u.internalError(w, r, err)
			return
		}
		row := sourceRow{Source: src, Forge: providerLabel(src, set), OrgWideDenied: set != nil && set.OrgWideWorkflows == store.OrgWideDeny}
		if withLog {
			if row.Events, _, err = u.d.Store.ListEventLog(r.Context(), store.EventLogFilter{RoutingKey: src.RoutingKey, Limit: 5}); err != nil {
				u.internalError(w, r, err)
				return
			}
			if row.Rejected, err = u.d.Store.ListRejected(r.Context(), src.ID, 5); err != nil {
				u.internalError(w, r, err)
				return
			}
		}
		rows = append(rows, row)
	}
	u.render(w, r, http.StatusOK, "sources", view{Title: "Sources", Nav: "sources", Who: p, CSRF: s.csrf,
		Data: map[string]any{"Rows": rows, "WithLog": withLog}})
}

type agentRow struct {
	Agent dispatch.AgentInfo
	Jobs  []*store.Job
}

// agentsPage shows connected agents and the scaler pools (agent.read,
// unscoped, like GET /scalers).
func (u *UI) agentsPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if !u.require(w, r, p, auth.PermAgentRead, true) {
		return
	}
	var rows []agentRow
	if u.d.Agents != nil {
		agents := u.d.Agents()
		sort.Slice(agents, func(i, j int) bool { return agents[i].ID < agents[j].ID })
		for _, a := range agents {
			row := agentRow{Agent: a}
			for _, id := range a.JobIDs {
				if j, err := u.d.Store.GetJob(r.Context(), id); err == nil {
					row.Jobs = append(row.Jobs, j)
				}
			}
			rows = append(rows, row)
		}
	}
	var pools *scaler.Status
	if u.d.Scalers != nil {
		st := u.d.Scalers()
		pools = &st
	}
	u.render(w, r, http.StatusOK, "agents", view{Title: "Agents", Nav: "agents", Who: p, CSRF: s.csrf, Live: "refresh",
		Data: map[string]any{"Agents": rows, "Pools": pools}})
}

type settingsData struct {
	Settings  *cluster.View
	Names     []string
	Drain     *runctl.DrainStatus
	Ready     bool
	ReadyErr  string
	Mode      config.Mode
	PublicURL string
}

// settingsPage shows cluster settings, drain state and health, read-only
// (settings.read, unscoped, like GET /cluster-settings).
func (u *UI) settingsPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if !u.require(w, r, p, auth.PermSettingsRead, true) {
		return
	}
	d := settingsData{Mode: u.d.Mode, PublicURL: u.d.PublicURL, Ready: true}
	if d.Mode == "" {
		d.Mode = config.ModeIndependent
	}
	if u.d.Settings != nil {
		v, err := u.d.Settings.View(r.Context())
		if err != nil {
			u.internalError(w, r, err)
			return
		}
		d.Settings = v
		for k := range v.Effective {
			d.Names = append(d.Names, k)
		}
		sort.Strings(d.Names)
	}
	if u.d.Drain != nil {
		ds := u.d.Drain()
		d.Drain = &ds
	}
	if u.d.Ready != nil {
		if err := u.d.Ready(r.Context()); err != nil {
			d.Ready, d.ReadyErr = false, err.Error()
		}
	}
	u.render(w, r, http.StatusOK, "settings", view{Title: "Settings", Nav: "settings", Who: p, CSRF: s.csrf, Data: d})
}

// namesReviewer reports whether person (an identity, "" = none) is named
// by a clause of one of holds: such a reviewer may decide it even
// without ci_trust.admin.
func namesReviewer(holds []*store.HeldRun, person string) bool {
	if person == "" {
		return false
	}
	for _, h := range holds {
		for _, c := range h.Clauses {
			if c.Value == person {
				return true
			}
		}
	}
	return false
}
