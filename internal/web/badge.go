package web

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"unicode/utf8"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// badgeRunsScanned bounds how many of a workflow's newest runs a badge
// looks through for one that ran on the branch (pull request runs that
// target the branch are skipped).
const badgeRunsScanned = 50

// badgeState is the right-hand side of a badge and its colour.
type badgeState struct {
	Text, Color string
}

// badgeStates maps a run's status to what its badge says.
var badgeStates = map[status.Run]badgeState{
	status.RunSuccess:    {"passing", "#15803d"},
	status.RunFailed:     {"failing", "#b91c1c"},
	status.RunCancelled:  {"cancelled", "#4b5563"},
	status.RunRunning:    {"running", "#b45309"},
	status.RunPending:    {"pending", "#6b7280"},
	status.RunHeld:       {"held", "#7c3aed"},
	status.RunCancelling: {"cancelling", "#b45309"},
}

var (
	badgeNoRuns  = badgeState{"no runs", "#6b7280"}
	badgeUnknown = badgeState{"unknown", "#6b7280"}
	badgePrivate = badgeState{"sign in", "#6b7280"}
)

// badge serves GET /ui/badge/{source}/{workflow}.svg[?branch=]: an SVG
// status badge of the newest run of a source's workflow (source by id or
// name), on the branch when given (a push, manual or scheduled run of
// refs/heads/<branch>; pull request runs are not counted), else of any
// branch but pull requests. By default only a signed-in caller who may
// read the source's runs gets it (401 otherwise, 404 for a source outside
// a scoped caller's key); cluster setting publicBadges = 1 serves it to
// anyone. An unknown source or workflow answers 404 with an "unknown"
// badge. Never cached: the status changes with every run.
func (u *UI) badge(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate")
	ctx := r.Context()
	file := r.PathValue("workflow")
	wf, ok := strings.CutSuffix(file, ".svg")
	if !ok || wf == "" {
		writeBadge(w, http.StatusNotFound, "badge", badgeUnknown)
		return
	}
	label := wf
	public := u.d.Settings != nil && u.d.Settings.Int(ctx, cluster.PublicBadges) == 1
	var p auth.Principal
	if !public {
		_, sp, res := u.lookupSession(r)
		switch {
		case res == sessionUnavailable:
			writeBadge(w, http.StatusServiceUnavailable, label, badgeUnknown)
			return
		case res != sessionOK:
			if res == sessionUnknown {
				u.d.Auth.Failed(r)
			}
			writeBadge(w, http.StatusUnauthorized, label, badgePrivate)
			return
		case !can(sp, auth.PermRunRead):
			writeBadge(w, http.StatusForbidden, label, badgePrivate)
			return
		}
		p = sp
	}
	src, err := u.badgeSource(ctx, r.PathValue("source"))
	if err != nil {
		u.log.Error("web: badge", "error", err)
		writeBadge(w, http.StatusInternalServerError, label, badgeUnknown)
		return
	}
	if src == nil || (p.RoutingKey != "" && src.RoutingKey != p.RoutingKey) {
		writeBadge(w, http.StatusNotFound, label, badgeUnknown)
		return
	}
	branch := r.URL.Query().Get("branch")
	runs, _, err := u.d.Store.ListRuns(ctx, store.RunFilter{SourceID: src.ID, WorkflowName: wf, Branch: branch, Limit: badgeRunsScanned})
	if err != nil {
		u.log.Error("web: badge", "error", err)
		writeBadge(w, http.StatusInternalServerError, label, badgeUnknown)
		return
	}
	st := badgeNoRuns
	for _, run := range runs {
		if run.TriggerType == apitypes.TriggerPullRequest || (branch != "" && run.Ref != "refs/heads/"+branch) {
			continue
		}
		if s, ok := badgeStates[run.Status]; ok {
			st = s
		} else {
			st = badgeState{string(run.Status), "#6b7280"}
		}
		break
	}
	writeBadge(w, http.StatusOK, label, st)
}

// badgeSource finds a source by id, else by a name only one source has;
// nil when none (or several) match.
func (u *UI) badgeSource(ctx context.Context, key string) (*store.Source, error) {
	all, err := u.d.Store.ListSources(ctx, "")
	if err != nil {
		return nil, err
	}
	var byName []*store.Source
	for _, s := range all {
		if s.ID == key {
			return s, nil
		}
		if s.Name == key {
			byName = append(byName, s)
		}
	}
	if len(byName) == 1 {
		return byName[0], nil
	}
	return nil, nil
}

// badgeCharW is the width given to one character of badge text (11px
// sans-serif averages about 6.5 units); badgePad pads each side.
const (
	badgeCharW = 7
	badgePad   = 6
)

// writeBadge writes a flat two-part badge, label on the left and the
// state on the right. Both texts are XML-escaped (names come from
// repositories) and shortened to 40 characters.
func writeBadge(w http.ResponseWriter, code int, label string, st badgeState) {
	label, text := truncate(40, label), truncate(40, st.Text)
	lw := utf8.RuneCountInString(label)*badgeCharW + 2*badgePad
	rw := utf8.RuneCountInString(text)*badgeCharW + 2*badgePad
	el, et := html.EscapeString(label), html.EscapeString(text)
	svg := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%[1]d" height="20" role="img" aria-label="%[4]s: %[5]s">`+
		`<title>%[4]s: %[5]s</title>`+
		`<rect width="%[2]d" height="20" fill="#555"/><rect x="%[2]d" width="%[3]d" height="20" fill="%[6]s"/>`+
		`<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">`+
		`<text x="%[7]d" y="14">%[4]s</text><text x="%[8]d" y="14">%[5]s</text></g></svg>`,
		lw+rw, lw, rw, el, et, st.Color, badgePad, lw+badgePad)
	w.Header().Set("Content-Type", "image/svg+xml; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(svg))
}
