package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"kici.dev/kici/internal/store"
)

const queueCols = `id, run_id, job_name, runs_on_labels, exclude_labels, status, agent_id, dispatch_attempts, ack_deadline, pinned_agent_id, created_at`

// queueSelectCols reads queueCols with the jsonb columns as text.
const queueSelectCols = `id, run_id, job_name, runs_on_labels::text, exclude_labels::text, status, agent_id, dispatch_attempts, ack_deadline, pinned_agent_id, created_at`

func scanQueue(r scanner) (*store.QueueEntry, error) {
	var e store.QueueEntry
	if err := r.Scan(&e.ID, &e.RunID, &e.JobName, jsonCol{&e.RunsOnLabels, "queue runs_on_labels"},
		jsonCol{&e.ExcludeLabels, "queue exclude_labels"}, &e.Status, &e.AgentID, &e.Attempts, ntcol(&e.AckDeadline),
		&e.PinnedAgentID, tcol(&e.CreatedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &e, nil
}

// claimed returns the entry of a claiming UPDATE … RETURNING, or nil.
func claimed(row *sql.Row) (*store.QueueEntry, error) {
	e, err := scanQueue(row)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return e, err
}

// Enqueue inserts an entry (status "pending" when empty; zero CreatedAt =
// now); ErrConflict if the id exists.
func (s *Store) Enqueue(ctx context.Context, e *store.QueueEntry) error {
	q, args, err := s.queueInsert(e)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, q, args...)
	return mapErr(err)
}

// queueValuesPG are the placeholders of queueCols on PostgreSQL.
const queueValuesPG = `?,?,?,?::jsonb,?::jsonb,?,?,?,?,?,?`

// queueInsert is the INSERT of entry e (status pending and created now
// when unset) and its arguments.
func (s *Store) queueInsert(e *store.QueueEntry) (string, []any, error) {
	if e.Status == "" {
		e.Status = store.QueuePending
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now()
	}
	labels, err := jsonArg(e.RunsOnLabels, e.RunsOnLabels == nil)
	if err != nil {
		return "", nil, err
	}
	exclude, err := jsonArg(e.ExcludeLabels, e.ExcludeLabels == nil)
	if err != nil {
		return "", nil, err
	}
	// seq orders entries created in the same millisecond: an identity
	// column on PostgreSQL, the next number on SQLite (whose writers hold
	// the database lock).
	q := `INSERT INTO dispatch_queue (seq, ` + queueCols + `)
		VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM dispatch_queue), ?,?,?,?,?,?,?,?,?,?,?)`
	if s.d.Postgres {
		q = `INSERT INTO dispatch_queue (` + queueCols + `) VALUES (` + queueValuesPG + `)`
	}
	return q, []any{e.ID, e.RunID, e.JobName, labels, exclude, e.Status, e.AgentID, e.Attempts,
		s.d.tsPtr(e.AckDeadline), e.PinnedAgentID, s.d.ts(e.CreatedAt)}, nil
}

// claimNextSQL claims in one statement the oldest pending entry whose
// labels the agent has. On PostgreSQL the sub-select locks the row,
// skipping rows other claimants hold; on SQLite the IMMEDIATE transaction
// holds the database's write lock.
var claimNextSQL = map[bool]string{
	false: `UPDATE dispatch_queue
		SET status = 'dispatched', agent_id = ?1, ack_deadline = ?3
		WHERE status = 'pending' AND id = (
			SELECT q.id FROM dispatch_queue q
			WHERE q.status = 'pending'
			  AND (q.pinned_agent_id = '' OR q.pinned_agent_id = ?1)
			  AND NOT EXISTS (SELECT 1 FROM json_each(COALESCE(q.runs_on_labels, '[]')) r
			                  WHERE r.value NOT IN (SELECT value FROM json_each(?2)))
			  AND NOT EXISTS (SELECT 1 FROM json_each(COALESCE(q.exclude_labels, '[]')) x
			                  WHERE x.value IN (SELECT value FROM json_each(?2)))
			ORDER BY q.created_at, q.seq
			LIMIT 1)
		RETURNING ` + queueSelectCols,
	true: `UPDATE dispatch_queue
		SET status = 'dispatched', agent_id = ?1, ack_deadline = ?3
		WHERE status = 'pending' AND id = (
			SELECT q.id FROM dispatch_queue q
			WHERE q.status = 'pending'
			  AND (q.pinned_agent_id = '' OR q.pinned_agent_id = ?1)
			  AND COALESCE(q.runs_on_labels, '[]'::jsonb) <@ ?2::jsonb
			  AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(COALESCE(q.exclude_labels, '[]'::jsonb)) x
			                  WHERE ?2::jsonb @> jsonb_build_array(x))
			ORDER BY q.created_at, q.seq
			FOR UPDATE SKIP LOCKED
			LIMIT 1)
		RETURNING ` + queueSelectCols,
}

// ClaimNext atomically claims the oldest pending entry an agent with labels
// may take (RunsOnLabels ⊆ labels, no ExcludeLabels in labels, PinnedAgentID
// empty or agentID), marks it dispatched to agentID with ackDeadline and
// returns it; (nil, nil) when nothing fits.
func (s *Store) ClaimNext(ctx context.Context, agentID string, labels []string, ackDeadline time.Time) (*store.QueueEntry, error) {
	if labels == nil {
		labels = []string{}
	}
	labelsJSON, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	args := []any{agentID, string(labelsJSON), s.d.ts(ackDeadline)}
	if s.d.Postgres {
		return claimed(s.queryRow(ctx, claimNextSQL[true], args...))
	}
	var e *store.QueueEntry
	err = s.tx(ctx, func(tx conn) error {
		var err error
		e, err = claimed(tx.queryRow(ctx, claimNextSQL[false], args...))
		return err
	})
	return e, err
}

// ClaimByID claims one specific pending entry for agentID (pins and labels
// are the caller's business); (nil, nil) if it is no longer pending.
func (s *Store) ClaimByID(ctx context.Context, id, agentID string, ackDeadline time.Time) (*store.QueueEntry, error) {
	return claimed(s.queryRow(ctx, `UPDATE dispatch_queue
		SET status = 'dispatched', agent_id = ?, ack_deadline = ?
		WHERE id = ? AND status = 'pending' RETURNING `+queueSelectCols, agentID, s.d.ts(ackDeadline), id))
}

// AckQueueEntry clears the ack deadline of an entry dispatched to agentID;
// ErrNotFound when no such dispatched entry exists.
func (s *Store) AckQueueEntry(ctx context.Context, id, agentID string) error {
	return affected(s.exec(ctx, `UPDATE dispatch_queue SET ack_deadline = NULL
		WHERE id = ? AND agent_id = ? AND status = 'dispatched'`, id, agentID))
}

// RequeueEntry moves a dispatched entry back to pending (clearing agent and
// ack deadline) and increments Attempts; reports the new attempt count, or
// ok=false if the entry is not dispatched.
func (s *Store) RequeueEntry(ctx context.Context, id string) (int, bool, error) {
	var attempts int
	err := s.queryRow(ctx, `UPDATE dispatch_queue
		SET status = 'pending', agent_id = '', ack_deadline = NULL, dispatch_attempts = dispatch_attempts + 1
		WHERE id = ? AND status = 'dispatched' RETURNING dispatch_attempts`, id).Scan(&attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return attempts, true, nil
}

// SetQueueStatus moves an entry to `to` if its status is in `from` (nil
// from = any non-terminal queue status). Reports whether a row changed.
func (s *Store) SetQueueStatus(ctx context.Context, id string, from []string, to string) (bool, error) {
	cond, condArgs := statusCond(from, store.TerminalQueueStatuses)
	return changed(s.exec(ctx, `UPDATE dispatch_queue SET status = ? WHERE id = ? AND `+cond,
		append([]any{to, id}, condArgs...)...))
}

// ListQueue returns entries in the given statuses (all if empty), oldest
// first.
func (s *Store) ListQueue(ctx context.Context, statuses []string) ([]*store.QueueEntry, error) {
	cond, args := inList("status", statuses, false)
	if len(statuses) == 0 {
		cond = "1=1"
	}
	rows, err := s.query(ctx, `SELECT `+queueSelectCols+` FROM dispatch_queue WHERE `+cond+` ORDER BY created_at, seq`, args...)
	return collect(rows, err, scanQueue)
}

// GetQueueEntry returns the entry of job id, or ErrNotFound.
func (s *Store) GetQueueEntry(ctx context.Context, id string) (*store.QueueEntry, error) {
	return scanQueue(s.queryRow(ctx, `SELECT `+queueSelectCols+` FROM dispatch_queue WHERE id = ?`, id))
}

// PinQueueEntry sets (or clears with "") the pinned agent of a pending
// entry; ErrNotFound when no such pending entry exists.
func (s *Store) PinQueueEntry(ctx context.Context, id, agentID string) error {
	return affected(s.exec(ctx, `UPDATE dispatch_queue SET pinned_agent_id = ? WHERE id = ? AND status = 'pending'`, agentID, id))
}
