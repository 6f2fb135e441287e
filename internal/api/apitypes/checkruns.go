package apitypes

import "time"

// CheckRunView is one row of GET /check-runs: what kici posted for a job
// on its forge and the last delivery result. It is not store.CheckRun, which
// holds the request bodies and hashes that are never served; package api
// copies the served fields and derives Delivery from the hashes.
type CheckRunView struct {
	JobID          string           `json:"jobId"`
	RunID          string           `json:"runId"`
	Provider       string           `json:"provider"`
	Repo           string           `json:"repo"`
	SHA            string           `json:"sha"`
	Name           string           `json:"name"`
	ExternalID     string           `json:"externalId,omitempty"`
	DesiredState   string           `json:"desiredState"`
	PostedState    string           `json:"postedState,omitempty"`
	PostedAt       *time.Time       `json:"postedAt,omitempty"`
	Delivery       CheckRunDelivery `json:"delivery"`
	Attempts       int              `json:"attempts"`
	NextAttemptAt  *time.Time       `json:"nextAttemptAt,omitempty"`
	LastError      string           `json:"lastError,omitempty"`
	LastStatusCode int              `json:"lastStatusCode,omitempty"`
	UpdatedAt      time.Time        `json:"updatedAt"`
}
