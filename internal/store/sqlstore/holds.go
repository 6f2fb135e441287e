package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

var _ store.HoldStore = (*Store)(nil)

const heldRunCols = `id, org_id, run_id, job_id, hold_type, queue_type, hold_scope, status, reason, clauses, expires_at,
	created_at, resolved_at, resolved_by, resolve_note, concurrency_group`

// heldRunSelectCols reads heldRunCols with clauses (jsonb) as text.
const heldRunSelectCols = `id, org_id, run_id, job_id, hold_type, queue_type, hold_scope, status, reason, clauses::text, expires_at,
	created_at, resolved_at, resolved_by, resolve_note, concurrency_group`

func scanHeldRun(r scanner) (*store.HeldRun, error) {
	var h store.HeldRun
	var clauses string
	if err := r.Scan(&h.ID, &h.OrgID, &h.RunID, &h.JobID, &h.HoldType, &h.QueueType, &h.HoldScope, &h.Status, &h.Reason,
		&clauses, tcol(&h.ExpiresAt), tcol(&h.CreatedAt), ntcol(&h.ResolvedAt), &h.ResolvedBy, &h.ResolveNote, &h.Group); err != nil {
		return nil, mapErr(err)
	}
	if err := json.Unmarshal([]byte(clauses), &h.Clauses); err != nil {
		return nil, fmt.Errorf("held run %s clauses: %w", h.ID, err)
	}
	if h.Clauses == nil {
		h.Clauses = []store.ApprovalClause{}
	}
	return &h, nil
}

// CreateHeldRun inserts a pending hold with its context names; a job-scoped
// hold first moves its job (of h.RunID) from jobFrom (nil = any non-terminal
// status) to held, and when that matches no row nothing is written. The
// context names are locked first, so a hold and the deletion of one of its
// contexts serialise.
func (s *Store) CreateHeldRun(ctx context.Context, h *store.HeldRun, jobFrom []status.Job) (bool, error) {
	store.PrepareHeldRun(h, now())
	clauses, err := json.Marshal(h.Clauses)
	if err != nil {
		return false, err
	}
	ok := false
	err = s.tx(ctx, func(tx conn) error {
		for _, name := range h.Contexts {
			if err := tx.lock(ctx, lockClassContext, h.OrgID+"\n"+name); err != nil {
				return err
			}
		}
		if h.JobID != "" {
			cond, condArgs := statusCond(jobFrom, store.TerminalJobStatuses)
			res, err := tx.exec(ctx, `UPDATE execution_jobs SET status = ?, pending_reason = ?
				WHERE id = ? AND run_id = ? AND `+cond, append([]any{string(status.JobHeld), "held: " + h.Reason, h.JobID, h.RunID}, condArgs...)...)
			if n, err := changed(res, err); err != nil || !n {
				return err
			}
		}
		if _, err := tx.exec(ctx, `INSERT INTO held_runs (`+heldRunCols+`) VALUES (?,?,?,?,?,?,?,?,?,?::jsonb,?,?,?,?,?,?)`,
			h.ID, h.OrgID, h.RunID, h.JobID, h.HoldType, h.QueueType, h.HoldScope, h.Status, h.Reason, string(clauses),
			s.d.ts(h.ExpiresAt), s.d.ts(h.CreatedAt), s.d.tsPtr(h.ResolvedAt), h.ResolvedBy, h.ResolveNote, h.Group); err != nil {
			return err
		}
		for _, name := range h.Contexts {
			if _, err := tx.exec(ctx, `INSERT INTO held_run_contexts (held_run_id, org_id, context_name) VALUES (?,?,?)`,
				h.ID, h.OrgID, name); err != nil {
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
	h, err := scanHeldRun(s.queryRow(ctx, `SELECT `+heldRunSelectCols+` FROM held_runs WHERE id = ?`, id))
	if err != nil {
		return nil, err
	}
	if err := loadHoldDetails(ctx, s.conn, []*store.HeldRun{h}); err != nil {
		return nil, err
	}
	return h, nil
}

// ListHeldRuns returns matching holds, oldest first (created_at, then id).
func (s *Store) ListHeldRuns(ctx context.Context, f store.HeldRunFilter) ([]*store.HeldRun, error) {
	var c conds
	if f.OrgID != "" {
		c.add("org_id = ?", f.OrgID)
	}
	if f.RunID != "" {
		c.add("run_id = ?", f.RunID)
	}
	if f.JobID != "" {
		c.add("job_id = ?", f.JobID)
	}
	if len(f.Statuses) > 0 {
		cond, args := inList("status", f.Statuses, false)
		c.add(cond, args...)
	}
	if f.DueBy != nil {
		c.add("expires_at <= ?", s.d.ts(*f.DueBy))
	}
	if f.HoldType != "" {
		c.add("hold_type = ?", f.HoldType)
	}
	if f.Group != "" {
		c.add("concurrency_group = ?", f.Group)
	}
	page, args := c.page(store.PageLimit(f.Limit, 100, 1000), 0)
	rows, err := s.query(ctx, `SELECT `+heldRunSelectCols+` FROM held_runs`+c.where()+` ORDER BY created_at, id`+page, args...)
	list, err := collect(rows, err, scanHeldRun)
	if err != nil {
		return nil, err
	}
	if err := loadHoldDetails(ctx, s.conn, list); err != nil {
		return nil, err
	}
	return list, nil
}

// loadHoldDetails fills the Contexts and Approvals of holds.
func loadHoldDetails(ctx context.Context, q conn, holds []*store.HeldRun) error {
	if len(holds) == 0 {
		return nil
	}
	byID := make(map[string]*store.HeldRun, len(holds))
	ids := make([]string, 0, len(holds))
	for _, h := range holds {
		byID[h.ID] = h
		ids = append(ids, h.ID)
	}
	in, idArgs := inList("held_run_id", ids, false)
	rows, err := q.query(ctx, `SELECT held_run_id, context_name FROM held_run_contexts
		WHERE `+in+` ORDER BY held_run_id, context_name`, idArgs...)
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
	rows, err = q.query(ctx, `SELECT held_run_id, approver, decision, clauses::text, reason, at FROM held_run_approvals
		WHERE `+in+` ORDER BY held_run_id, id`, idArgs...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, clauses string
		var a store.HeldRunApproval
		if err := rows.Scan(&id, &a.Approver, &a.Decision, &clauses, &a.Reason, tcol(&a.At)); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(clauses), &a.Clauses); err != nil {
			return fmt.Errorf("held run %s approval clauses: %w", id, err)
		}
		if len(a.Clauses) == 0 {
			a.Clauses = nil
		}
		byID[id].Approvals = append(byID[id].Approvals, a)
	}
	return rows.Err()
}

// DecideHeldRun records a decision on a pending hold in one transaction.
// The conditional UPDATE … WHERE status = 'pending' (re-checked after
// waiting for a concurrent decider's row lock on PostgreSQL) is what makes
// exactly one of two concurrent resolutions win.
func (s *Store) DecideHeldRun(ctx context.Context, id string, a *store.HeldRunApproval, clauses []store.ApprovalClause,
	to hold.Status, by, note string, at time.Time) (bool, error) {
	var clauseArg any
	if clauses != nil {
		b, err := json.Marshal(clauses)
		if err != nil {
			return false, err
		}
		clauseArg = string(b)
	}
	if to == hold.Pending {
		to = ""
	}
	ok := false
	err := s.tx(ctx, func(tx conn) error {
		var res sql.Result
		var err error
		if to == "" {
			res, err = tx.exec(ctx, `UPDATE held_runs SET clauses = COALESCE(?::jsonb, clauses) WHERE id = ? AND status = 'pending'`,
				clauseArg, id)
		} else {
			res, err = tx.exec(ctx, `UPDATE held_runs SET clauses = COALESCE(?::jsonb, clauses), status = ?, resolved_at = ?,
				resolved_by = ?, resolve_note = ? WHERE id = ? AND status = 'pending'`, clauseArg, to, s.d.ts(at), by, note, id)
		}
		n, err := changed(res, err)
		if err != nil {
			return err
		}
		if !n {
			var one int
			return tx.queryRow(ctx, `SELECT 1 FROM held_runs WHERE id = ?`, id).Scan(&one)
		}
		if a != nil {
			if a.At.IsZero() {
				a.At = at
			}
			ac := a.Clauses
			if ac == nil {
				ac = []string{}
			}
			b, err := json.Marshal(ac)
			if err != nil {
				return err
			}
			if _, err := tx.exec(ctx, `INSERT INTO held_run_approvals (held_run_id, approver, decision, clauses, reason, at)
				VALUES (?,?,?,?::jsonb,?,?)`, id, a.Approver, a.Decision, string(b), a.Reason, s.d.ts(a.At)); err != nil {
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
	return countPendingHolds(ctx, s.conn, orgID, name)
}

func countPendingHolds(ctx context.Context, q conn, orgID, name string) (int, error) {
	var n int
	err := q.queryRow(ctx, `SELECT COUNT(*) FROM held_runs h JOIN held_run_contexts c ON c.held_run_id = h.id
		WHERE h.status = 'pending' AND h.org_id = ?1 AND c.org_id = ?1 AND c.context_name = ?2`, orgID, name).Scan(&n)
	return n, err
}
