package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/store"
)

var _ store.HoldStore = (*Store)(nil)

// Advisory-lock classes (the first key of pg_advisory_xact_lock(int, int)),
// so kici's per-name locks never collide across kinds.
const (
	lockClassContext = 0x6b6301 // a context name of an org: hold creation vs context deletion
	lockClassTrust   = 0x6b6302 // an org's trust policy and approval directory
)

// lockContextName takes the transaction-scoped advisory lock of context
// name of org. A hash collision only serialises unrelated names.
func lockContextName(ctx context.Context, q pgExecQueryer, orgID, name string) error {
	_, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockClassContext, orgID+"\n"+name)
	return err
}

const heldRunInsertCols = `id, org_id, run_id, job_id, hold_type, queue_type, hold_scope, status, reason, clauses, expires_at,
	created_at, resolved_at, resolved_by, resolve_note, concurrency_group`

const heldRunSelectCols = `id, org_id, run_id, job_id, hold_type, queue_type, hold_scope, status, reason, clauses::text, expires_at,
	created_at, resolved_at, resolved_by, resolve_note, concurrency_group`

func scanHeldRun(r scanner) (*store.HeldRun, error) {
	var h store.HeldRun
	var clauses string
	if err := r.Scan(&h.ID, &h.OrgID, &h.RunID, &h.JobID, &h.HoldType, &h.QueueType, &h.HoldScope, &h.Status, &h.Reason,
		&clauses, &h.ExpiresAt, &h.CreatedAt, &h.ResolvedAt, &h.ResolvedBy, &h.ResolveNote, &h.Group); err != nil {
		return nil, mapErr(err)
	}
	if err := json.Unmarshal([]byte(clauses), &h.Clauses); err != nil {
		return nil, fmt.Errorf("postgres: held run %s clauses: %w", h.ID, err)
	}
	if h.Clauses == nil {
		h.Clauses = []store.ApprovalClause{}
	}
	h.ExpiresAt = h.ExpiresAt.UTC()
	h.CreatedAt = h.CreatedAt.UTC()
	h.ResolvedAt = utc(h.ResolvedAt)
	return &h, nil
}

// CreateHeldRun inserts a pending hold with its context names; a job-scoped
// hold first moves its job (of h.RunID) from jobFrom (nil = any non-terminal
// status) to held, and when that matches no row nothing is written. It
// takes the advisory lock of each context name (sorted, so two creators
// never deadlock) to serialise against DeleteContext.
func (s *Store) CreateHeldRun(ctx context.Context, h *store.HeldRun, jobFrom []string) (bool, error) {
	store.PrepareHeldRun(h, now())
	clauses, err := json.Marshal(h.Clauses)
	if err != nil {
		return false, err
	}
	ok := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, name := range h.Contexts {
			if err := lockContextName(ctx, tx, h.OrgID, name); err != nil {
				return err
			}
		}
		if h.JobID != "" {
			cond, condArg := statusCond(jobFrom, store.TerminalJobStatuses, 5)
			n, err := changed(tx.Exec(ctx, `UPDATE execution_jobs SET status = $1, pending_reason = $2
				WHERE id = $3 AND run_id = $4 AND `+cond, store.StatusHeld, "held: "+h.Reason, h.JobID, h.RunID, condArg))
			if err != nil || !n {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO held_runs (`+heldRunInsertCols+`)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10::jsonb,$11,$12,$13,$14,$15,$16)`,
			h.ID, h.OrgID, h.RunID, h.JobID, h.HoldType, h.QueueType, h.HoldScope, h.Status, h.Reason, string(clauses),
			ts(h.ExpiresAt), ts(h.CreatedAt), tsPtr(h.ResolvedAt), h.ResolvedBy, h.ResolveNote, h.Group); err != nil {
			return err
		}
		if len(h.Contexts) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO held_run_contexts (held_run_id, org_id, context_name)
				SELECT $1, $2, unnest($3::text[])`, h.ID, h.OrgID, h.Contexts); err != nil {
				return err
			}
		}
		ok = true
		return nil
	})
	return ok, mapErr(err)
}

// GetHeldRun returns one hold with its contexts and approvals.
func (s *Store) GetHeldRun(ctx context.Context, id string) (*store.HeldRun, error) {
	h, err := scanHeldRun(s.pool.QueryRow(ctx, `SELECT `+heldRunSelectCols+` FROM held_runs WHERE id = $1`, id))
	if err != nil {
		return nil, err
	}
	if err := loadHoldDetails(ctx, s.pool, []*store.HeldRun{h}); err != nil {
		return nil, err
	}
	return h, nil
}

// ListHeldRuns returns matching holds, oldest first (created_at, then id).
func (s *Store) ListHeldRuns(ctx context.Context, f store.HeldRunFilter) ([]*store.HeldRun, error) {
	var c conds
	if f.OrgID != "" {
		c.add("org_id = $%d", f.OrgID)
	}
	if f.RunID != "" {
		c.add("run_id = $%d", f.RunID)
	}
	if f.JobID != "" {
		c.add("job_id = $%d", f.JobID)
	}
	if len(f.Statuses) > 0 {
		c.add("status = ANY($%d::text[])", f.Statuses)
	}
	if f.DueBy != nil {
		c.add("expires_at <= $%d", ts(*f.DueBy))
	}
	if f.HoldType != "" {
		c.add("hold_type = $%d", f.HoldType)
	}
	if f.Group != "" {
		c.add("concurrency_group = $%d", f.Group)
	}
	page, args := c.page(store.PageLimit(f.Limit, 100, 1000), 0)
	rows, err := s.pool.Query(ctx, `SELECT `+heldRunSelectCols+` FROM held_runs`+c.where()+` ORDER BY created_at, id`+page, args...)
	list, err := collect(rows, err, scanHeldRun)
	if err != nil {
		return nil, err
	}
	if err := loadHoldDetails(ctx, s.pool, list); err != nil {
		return nil, err
	}
	return list, nil
}

// loadHoldDetails fills the Contexts and Approvals of holds.
func loadHoldDetails(ctx context.Context, q pgExecQueryer, holds []*store.HeldRun) error {
	if len(holds) == 0 {
		return nil
	}
	byID := make(map[string]*store.HeldRun, len(holds))
	ids := make([]string, 0, len(holds))
	for _, h := range holds {
		byID[h.ID] = h
		ids = append(ids, h.ID)
	}
	rows, err := q.Query(ctx, `SELECT held_run_id, context_name FROM held_run_contexts
		WHERE held_run_id = ANY($1::text[]) ORDER BY held_run_id, context_name`, ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			rows.Close()
			return err
		}
		byID[id].Contexts = append(byID[id].Contexts, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = q.Query(ctx, `SELECT held_run_id, approver, decision, clauses::text, reason, at FROM held_run_approvals
		WHERE held_run_id = ANY($1::text[]) ORDER BY held_run_id, id`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, clauses string
		var a store.HeldRunApproval
		if err := rows.Scan(&id, &a.Approver, &a.Decision, &clauses, &a.Reason, &a.At); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(clauses), &a.Clauses); err != nil {
			return fmt.Errorf("postgres: held run %s approval clauses: %w", id, err)
		}
		if len(a.Clauses) == 0 {
			a.Clauses = nil
		}
		a.At = a.At.UTC()
		byID[id].Approvals = append(byID[id].Approvals, a)
	}
	return rows.Err()
}

// DecideHeldRun records a decision on a pending hold in one transaction.
// The conditional UPDATE … WHERE status = 'pending' re-checks the status
// after waiting for a concurrent decider's row lock, so exactly one of two
// concurrent resolutions wins.
func (s *Store) DecideHeldRun(ctx context.Context, id string, a *store.HeldRunApproval, clauses []store.ApprovalClause,
	to, by, note string, at time.Time) (bool, error) {
	var clauseArg *string
	if clauses != nil {
		b, err := json.Marshal(clauses)
		if err != nil {
			return false, err
		}
		c := string(b)
		clauseArg = &c
	}
	if to == store.HoldPending {
		to = ""
	}
	ok := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var n bool
		var err error
		if to == "" {
			n, err = changed(tx.Exec(ctx, `UPDATE held_runs SET clauses = COALESCE($1::jsonb, clauses) WHERE id = $2 AND status = 'pending'`,
				clauseArg, id))
		} else {
			n, err = changed(tx.Exec(ctx, `UPDATE held_runs SET clauses = COALESCE($1::jsonb, clauses), status = $2, resolved_at = $3,
				resolved_by = $4, resolve_note = $5 WHERE id = $6 AND status = 'pending'`, clauseArg, to, ts(at), by, note, id))
		}
		if err != nil {
			return err
		}
		if !n {
			var one int
			return tx.QueryRow(ctx, `SELECT 1 FROM held_runs WHERE id = $1`, id).Scan(&one)
		}
		if a != nil {
			if a.At.IsZero() {
				a.At = at
			}
			b, err := json.Marshal(nonNil(a.Clauses))
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO held_run_approvals (held_run_id, approver, decision, clauses, reason, at)
				VALUES ($1,$2,$3,$4::jsonb,$5,$6)`, id, a.Approver, a.Decision, string(b), a.Reason, ts(a.At)); err != nil {
				return err
			}
		}
		ok = true
		return nil
	})
	return ok, mapErr(err)
}

// CountPendingHeldRunsForContext counts pending holds of org naming name.
func (s *Store) CountPendingHeldRunsForContext(ctx context.Context, orgID, name string) (int, error) {
	return countPendingHolds(ctx, s.pool, orgID, name)
}

func countPendingHolds(ctx context.Context, q pgExecQueryer, orgID, name string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM held_runs h JOIN held_run_contexts c ON c.held_run_id = h.id
		WHERE h.status = 'pending' AND h.org_id = $1 AND c.org_id = $1 AND c.context_name = $2`, orgID, name).Scan(&n)
	return n, err
}
