package store

import (
	"context"
	"encoding/json"
	"time"
)

// Check-run tracking providers: how a job's state reaches its forge.
const (
	// CheckProviderGitHubChecks posts GitHub check runs (App sources).
	CheckProviderGitHubChecks = "github-checks"
	// CheckProviderGitHubStatus posts GitHub commit statuses (token sources).
	CheckProviderGitHubStatus = "github-status"
	// CheckProviderGitea posts Gitea/Forgejo/Gogs commit statuses.
	CheckProviderGitea = "gitea"
	// CheckProviderGitLab posts GitLab commit statuses.
	CheckProviderGitLab = "gitlab"
)

// CheckRun is one job's report on its forge (KiCI check_run_tracking):
// the state kici wants the forge to show (Desired*, written as the job
// moves) and what was last delivered (Posted*), so that a restart neither
// creates the check twice nor loses its final state. JobID is the key.
type CheckRun struct {
	JobID    string `json:"jobId"`
	RunID    string `json:"runId"`
	SourceID string `json:"sourceId"`
	// Provider is one of the CheckProvider* values.
	Provider string `json:"provider"`
	// Repo is owner/name (a GitLab project path), SHA the commit reported on.
	Repo string `json:"repo"`
	SHA  string `json:"sha"`
	// Name is the check name or status context ("<workflow> / <job>" for
	// check runs, "kici/<workflow>/<job>" for statuses).
	Name string `json:"name"`
	// ExternalID is the forge's id of the check run ("" before it was
	// created, and for commit statuses, which have none to keep).
	ExternalID string `json:"externalId,omitempty"`

	// DesiredState is the state to show (queued, in_progress,
	// completed/<conclusion> for check runs; pending, success, failure,
	// error, … for statuses). DesiredBody is the request body to send,
	// DesiredHash identifies it. DesiredTerminal marks a final state, which
	// is delivered without coalescing.
	DesiredState    string          `json:"desiredState"`
	DesiredBody     json.RawMessage `json:"-"`
	DesiredHash     string          `json:"-"`
	DesiredTerminal bool            `json:"desiredTerminal"`
	DesiredAt       time.Time       `json:"desiredAt"`

	// PostedState and PostedHash are what the forge last accepted, at
	// PostedAt. CreateAttemptedAt is set before a check run is created, so
	// a crash between the forge's answer and recording it is detected and
	// the check is looked up instead of created again.
	PostedState       string     `json:"postedState,omitempty"`
	PostedHash        string     `json:"-"`
	PostedAt          *time.Time `json:"postedAt,omitempty"`
	CreateAttemptedAt *time.Time `json:"-"`

	// Attempts counts failed deliveries of the current desired state;
	// NextAttemptAt is when to try again; GaveUpHash is the desired hash a
	// permanent (4xx) error ended. LastError and LastStatusCode (0 = no
	// HTTP answer) describe the last failure ("" after a success).
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"nextAttemptAt,omitempty"`
	GaveUpHash     string     `json:"-"`
	LastError      string     `json:"lastError,omitempty"`
	LastStatusCode int        `json:"lastStatusCode,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

// CheckRunFilter selects tracking rows. Empty fields do not filter.
type CheckRunFilter struct {
	SHA   string
	RunID string
	// Open keeps rows whose desired state is not terminal or not delivered
	// yet (and not given up on).
	Open bool
	// DueAt keeps rows with something to deliver whose retry time has come
	// (NextAttemptAt unset or ≤ DueAt) and which were not given up on.
	DueAt *time.Time
	// Limit defaults to 500.
	Limit int
}

// CheckRunDelivery is the outcome of one delivery attempt.
type CheckRunDelivery struct {
	// OK: the forge accepted Hash (State, ExternalID); attempts and errors
	// are cleared.
	OK         bool
	Hash       string
	State      string
	ExternalID string
	At         time.Time
	// On failure: the error text, the HTTP status (0 = none), when to
	// retry (nil with GaveUp), and GaveUp for a permanent error.
	Err           string
	StatusCode    int
	NextAttemptAt *time.Time
	GaveUp        bool
}

// CheckRunStore keeps the check-run tracking rows (check_run_tracking).
type CheckRunStore interface {
	// UpsertCheckRunDesired inserts c, or updates the desired state, body,
	// hash, terminal flag, name and desired_at of its existing row (the
	// delivery columns are kept). A new desired hash resets Attempts and
	// NextAttemptAt.
	UpsertCheckRunDesired(ctx context.Context, c *CheckRun) error
	// MarkCheckRunCreateAttempted records that a check run is about to be
	// created for jobID (sets create_attempted_at = at).
	MarkCheckRunCreateAttempted(ctx context.Context, jobID string, at time.Time) error
	// RecordCheckRunDelivery stores the outcome of a delivery attempt.
	// ErrNotFound when the row is gone.
	RecordCheckRunDelivery(ctx context.Context, jobID string, d CheckRunDelivery) error
	// GetCheckRun returns a job's row, or ErrNotFound.
	GetCheckRun(ctx context.Context, jobID string) (*CheckRun, error)
	// ListCheckRuns returns rows matching f, oldest first.
	ListCheckRuns(ctx context.Context, f CheckRunFilter) ([]*CheckRun, error)
	// RecordCheckRunFailure writes a failed delivery to the event log as an
	// entry of its own (e.DeliveryID names it, e.g.
	// "forge-status:<jobId>:<hash>"); ErrConflict when that id is
	// recorded already (one entry per failed state, not one per retry).
	RecordCheckRunFailure(ctx context.Context, e *EventLogEntry) error
	// DeleteCheckRunsBefore removes rows last updated before t and returns
	// how many it removed (the checkRunTrackingTtlDays sweep).
	DeleteCheckRunsBefore(ctx context.Context, t time.Time) (int64, error)
}
