package api

import (
	"net/http"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// Delivery words of a check run in GET /check-runs (apitypes'; see
// apitypes.CheckRunDelivery).
const (
	// CheckDelivered: the forge accepted the state kici wants it to show.
	CheckDelivered = apitypes.CheckDelivered
	// CheckPending: a newer state waits for its turn (coalescing).
	CheckPending = apitypes.CheckPending
	// CheckRetrying: the last attempt failed with a retryable error.
	CheckRetrying = apitypes.CheckRetrying
	// CheckFailed: the forge refused the state (4xx); not retried.
	CheckFailed = apitypes.CheckFailed
)

// CheckRunViewOf maps a tracking row to its API view.
func CheckRunViewOf(c *store.CheckRun) apitypes.CheckRunView {
	v := apitypes.CheckRunView{JobID: c.JobID, RunID: c.RunID, Provider: c.Provider, Repo: c.Repo, SHA: c.SHA, Name: c.Name,
		ExternalID: c.ExternalID, DesiredState: c.DesiredState, PostedState: c.PostedState, PostedAt: c.PostedAt,
		Attempts: c.Attempts, NextAttemptAt: c.NextAttemptAt, LastError: c.LastError, LastStatusCode: c.LastStatusCode,
		UpdatedAt: c.UpdatedAt}
	switch {
	case c.PostedHash == c.DesiredHash:
		v.Delivery = CheckDelivered
	case c.GaveUpHash == c.DesiredHash:
		v.Delivery = CheckFailed
	case c.Attempts > 0:
		v.Delivery = CheckRetrying
	default:
		v.Delivery = CheckPending
	}
	return v
}

// listCheckRuns serves GET /check-runs?sha=<sha>|runId=<id> (KiCI
// `kici-admin check-run list --sha`): the check runs and commit statuses
// kici posted, oldest first, at most 1000 (without a filter: the oldest
// 200 rows kept). sha and runId are at most 64 characters (400).
func (s *server) listCheckRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.CheckRunFilter{SHA: q.Get("sha"), RunID: q.Get("runId"), Limit: 1000}
	if f.SHA == "" && f.RunID == "" {
		f.Limit = 200
	}
	if len(f.SHA) > 64 || len(f.RunID) > 64 {
		writeError(w, http.StatusBadRequest, "sha and runId are at most 64 characters")
		return
	}
	rows, err := s.d.Store.ListCheckRuns(r.Context(), f)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]apitypes.CheckRunView, 0, len(rows))
	for _, c := range rows {
		out = append(out, CheckRunViewOf(c))
	}
	writeJSON(w, http.StatusOK, apitypes.CheckRunList{CheckRuns: out})
}
