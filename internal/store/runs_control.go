package store

import (
	"context"
	"time"
)

// Concurrency entry statuses (KiCI concurrency_groups.status).
const (
	// ConcurrencyActive: the run holds a slot of its group.
	ConcurrencyActive = "active"
	// ConcurrencyQueued: the run waits for a slot (its jobs are not released).
	ConcurrencyQueued = "queued"
	// ConcurrencyCompleted: the run ended and gave its slot back.
	ConcurrencyCompleted = "completed"
	// ConcurrencyCancelled: the run was superseded or cancelled.
	ConcurrencyCancelled = "cancelled"
)

// ConcurrencyEntry is one run's membership of a workflow concurrency group
// (KiCI's concurrency_groups; see docs/kici-compatibility.md#runs-and-statuses).
// A group is identified by (Scope, Group): Scope is the repository
// identifier, Group the rendered group template.
type ConcurrencyEntry struct {
	RunID            string    `json:"runId"`
	Scope            string    `json:"scope"`
	Group            string    `json:"group"`
	Status           string    `json:"status"`
	Max              int       `json:"max"`
	CancelInProgress bool      `json:"cancelInProgress"`
	CreatedAt        time.Time `json:"createdAt"`
}

// RunLink ties a rerun to the run it repeats (KiCI parent_run_id) and to
// the root of the rerun chain (original_run_id).
type RunLink struct {
	RunID         string    `json:"runId"`
	ParentRunID   string    `json:"parentRunId"`
	OriginalRunID string    `json:"originalRunId"`
	CreatedAt     time.Time `json:"createdAt"`
}

// RunControlStore persists run-control state: concurrency group entries
// and rerun links.
type RunControlStore interface {
	// InsertRunLink records that l.RunID (an existing run) reruns
	// l.ParentRunID; ErrConflict when the run already has a link,
	// ErrNotFound when the run does not exist.
	InsertRunLink(ctx context.Context, l *RunLink) error
	// GetRunLink returns the link of a rerun, or ErrNotFound for a run that
	// is not a rerun.
	GetRunLink(ctx context.Context, runID string) (*RunLink, error)
	// ListRerunsOf returns the links of the reruns of parentRunID (the
	// runs that repeat it directly), oldest first, at most limit (≤ 0:
	// 100); none for a run never rerun.
	ListRerunsOf(ctx context.Context, parentRunID string, limit int) ([]*RunLink, error)
	// InsertConcurrencyEntry inserts e (CreatedAt defaulted to now);
	// ErrConflict when the run already has an entry.
	InsertConcurrencyEntry(ctx context.Context, e *ConcurrencyEntry) error
	// GetConcurrencyEntry returns the entry of a run, or ErrNotFound.
	GetConcurrencyEntry(ctx context.Context, runID string) (*ConcurrencyEntry, error)
	// ListConcurrencyEntries returns the entries of group (scope, group) in
	// the given statuses (all if empty), oldest first; scope and group both
	// "" list every group.
	ListConcurrencyEntries(ctx context.Context, scope, group string, statuses []string) ([]*ConcurrencyEntry, error)
	// SetConcurrencyStatus moves a run's entry to `to` if its status is in
	// `from`; reports whether it changed.
	SetConcurrencyStatus(ctx context.Context, runID string, from []string, to string) (bool, error)
}
