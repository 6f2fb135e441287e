package api

import (
	"net/http"
	"time"

	"kici.dev/kici/internal/store"
)

// Delivery words of a check run in GET /check-runs.
const (
	// CheckDelivered: the forge accepted the state kici wants it to show.
	CheckDelivered = "delivered"
	// CheckPending: a newer state waits for its turn (coalescing).
	CheckPending = "pending"
	// CheckRetrying: the last attempt failed with a retryable error.
	CheckRetrying = "retrying"
	// CheckFailed: the forge refused the state (4xx); not retried.
	CheckFailed = "failed"
)

// CheckRunView is one row of GET /check-runs: what kici posted for a job
// on its forge and the last delivery result.
type CheckRunView struct {
	JobID          string     `json:"jobId"`
	RunID          string     `json:"runId"`
	Provider       string     `json:"provider"`
	Repo           string     `json:"repo"`
	SHA            string     `json:"sha"`
	Name           string     `json:"name"`
	ExternalID     string     `json:"externalId,omitempty"`
	DesiredState   string     `json:"desiredState"`
	PostedState    string     `json:"postedState,omitempty"`
	PostedAt       *time.Time `json:"postedAt,omitempty"`
	Delivery       string     `json:"delivery"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"nextAttemptAt,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
	LastStatusCode int        `json:"lastStatusCode,omitempty"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

// CheckRunViewOf maps a tracking row to its API view.
func CheckRunViewOf(c *store.CheckRun) CheckRunView {
	v := CheckRunView{JobID: c.JobID, RunID: c.RunID, Provider: c.Provider, Repo: c.Repo, SHA: c.SHA, Name: c.Name,
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
	out := make([]CheckRunView, 0, len(rows))
	for _, c := range rows {
		out = append(out, CheckRunViewOf(c))
	}
	writeJSON(w, http.StatusOK, map[string]any{"checkRuns": out})
}
