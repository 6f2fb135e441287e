package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
)

var _ store.ContextStore = (*Store)(nil)

const contextCols = `id, org_id, name, type, glob_pattern, enabled, branch_restrictions, required_reviewers,
	wait_timer_seconds, hold_expiry_seconds, minimum_trust, allow_local_execution, trigger_type_filters, repo_patterns,
	allow_untrusted, concurrency_limit, concurrency_strategy, concurrency_timeout_ms, created_by, created_at, updated_at`

// contextSelect reads contextCols, the jsonb columns as text.
const contextSelect = `SELECT id, org_id, name, type, glob_pattern, enabled, branch_restrictions::text, required_reviewers::text,
	wait_timer_seconds, hold_expiry_seconds, minimum_trust, allow_local_execution, trigger_type_filters::text,
	repo_patterns::text, allow_untrusted, concurrency_limit, concurrency_strategy, concurrency_timeout_ms, created_by,
	created_at, updated_at FROM contexts`

func scanContext(r scanner) (*store.Context, error) {
	var c store.Context
	var branches, triggers, repos string
	var reviewers, trust sql.NullString
	if err := r.Scan(&c.ID, &c.OrgID, &c.Name, &c.Type, &c.GlobPattern, &c.Enabled, &branches, &reviewers,
		ni64col(&c.WaitTimerSeconds), ni64col(&c.HoldExpirySeconds), &trust, &c.AllowLocalExecution, &triggers, &repos,
		&c.AllowUntrusted, ni64col(&c.ConcurrencyLimit), &c.ConcurrencyStrategy, ni64col(&c.ConcurrencyTimeoutMs), &c.CreatedBy,
		tcol(&c.CreatedAt), tcol(&c.UpdatedAt)); err != nil {
		return nil, mapErr(err)
	}
	for _, l := range []struct {
		raw string
		dst *[]string
	}{{branches, &c.BranchRestrictions}, {triggers, &c.TriggerTypeFilters}, {repos, &c.RepoPatterns}} {
		if err := json.Unmarshal([]byte(l.raw), l.dst); err != nil {
			return nil, err
		}
		if *l.dst == nil {
			*l.dst = []string{}
		}
	}
	if reviewers.Valid {
		c.RequiredReviewers = []string{}
		if err := json.Unmarshal([]byte(reviewers.String), &c.RequiredReviewers); err != nil {
			return nil, err
		}
	}
	if trust.Valid {
		c.MinimumTrust = &trust.String
	}
	return &c, nil
}

// contextLists are the stored JSON forms of a context's list fields.
type contextLists struct {
	branches, triggers, repos string
	reviewers                 any // NULL: no approval required
}

// contextPolicyArgs returns the stored forms of c's list fields; a nil
// never-nil list is stored as [].
func contextPolicyArgs(c *store.Context) (l contextLists, err error) {
	if l.branches, err = listJSON(c.BranchRestrictions); err != nil {
		return l, err
	}
	if l.triggers, err = listJSON(c.TriggerTypeFilters); err != nil {
		return l, err
	}
	if l.repos, err = listJSON(c.RepoPatterns); err != nil {
		return l, err
	}
	if c.RequiredReviewers != nil {
		r, err := json.Marshal(c.RequiredReviewers)
		if err != nil {
			return l, err
		}
		l.reviewers = string(r)
	}
	return l, nil
}

// defaultStrategy stores an unset concurrency strategy as
// store.ConcurrencyQueue, KiCI's column default, so a stored context never
// has "".
func defaultStrategy(c *store.Context) {
	if c.ConcurrencyStrategy == "" {
		c.ConcurrencyStrategy = store.ConcurrencyQueue
	}
}

// listJSON encodes a list as a JSON array, nil as [].
func listJSON(v []string) (string, error) {
	if v == nil {
		v = []string{}
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func contextID(ctx context.Context, q conn, orgID, name string) (string, error) {
	var id string
	err := q.queryRow(ctx, `SELECT id FROM contexts WHERE org_id = ? AND name = ?`, orgID, name).Scan(&id)
	return id, mapErr(err)
}

// UpsertContext inserts or replaces a context keyed on (org, name), with
// optional unlocked variables, in one transaction.
func (s *Store) UpsertContext(ctx context.Context, c *store.Context, vars map[string]string) (bool, error) {
	defaultStrategy(c)
	l, err := contextPolicyArgs(c)
	if err != nil {
		return false, err
	}
	created := false
	err = s.tx(ctx, func(tx conn) error {
		t := now()
		existing, err := scanContext(tx.queryRow(ctx, contextSelect+` WHERE org_id = ? AND name = ?`+s.d.forUpdate(), c.OrgID, c.Name))
		switch {
		case errors.Is(err, store.ErrNotFound):
			created = true
			c.ID = uuid.NewString()
			c.CreatedAt, c.UpdatedAt = t, t
			if _, err := tx.exec(ctx, `INSERT INTO contexts (`+contextCols+`) VALUES (?,?,?,?,?,?,?::jsonb,?::jsonb,?,?,?,?,?::jsonb,?::jsonb,?,?,?,?,?,?,?)`,
				c.ID, c.OrgID, c.Name, c.Type, c.GlobPattern, c.Enabled, l.branches, l.reviewers, int64Arg(c.WaitTimerSeconds),
				int64Arg(c.HoldExpirySeconds), strArg(c.MinimumTrust), c.AllowLocalExecution, l.triggers, l.repos,
				c.AllowUntrusted, int64Arg(c.ConcurrencyLimit), c.ConcurrencyStrategy, int64Arg(c.ConcurrencyTimeoutMs),
				c.CreatedBy, s.d.ts(t), s.d.ts(t)); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			c.ID, c.CreatedBy, c.CreatedAt, c.UpdatedAt = existing.ID, existing.CreatedBy, existing.CreatedAt, t
			if _, err := tx.exec(ctx, `UPDATE contexts SET type = ?, glob_pattern = ?, enabled = ?, branch_restrictions = ?::jsonb,
				required_reviewers = ?::jsonb, wait_timer_seconds = ?, hold_expiry_seconds = ?, minimum_trust = ?, allow_local_execution = ?,
				trigger_type_filters = ?::jsonb, repo_patterns = ?::jsonb, allow_untrusted = ?, concurrency_limit = ?, concurrency_strategy = ?,
				concurrency_timeout_ms = ?, updated_at = ? WHERE id = ?`,
				c.Type, c.GlobPattern, c.Enabled, l.branches, l.reviewers, int64Arg(c.WaitTimerSeconds),
				int64Arg(c.HoldExpirySeconds), strArg(c.MinimumTrust), c.AllowLocalExecution, l.triggers, l.repos,
				c.AllowUntrusted, int64Arg(c.ConcurrencyLimit), c.ConcurrencyStrategy, int64Arg(c.ConcurrencyTimeoutMs),
				s.d.ts(t), c.ID); err != nil {
				return err
			}
		}
		for k, v := range vars {
			if _, err := tx.exec(ctx, `INSERT INTO context_variables (context_id, key, value, locked, updated_at) VALUES (?,?,?,false,?)
				ON CONFLICT (context_id, key) DO UPDATE SET value = excluded.value, locked = false, updated_at = excluded.updated_at`,
				c.ID, k, v, s.d.ts(t)); err != nil {
				return err
			}
		}
		return nil
	})
	return created, mapErr(err)
}

// GetContext returns one context.
func (s *Store) GetContext(ctx context.Context, orgID, name string) (*store.Context, error) {
	return scanContext(s.queryRow(ctx, contextSelect+` WHERE org_id = ? AND name = ?`, orgID, name))
}

// ListContexts returns the contexts of org ordered by name.
func (s *Store) ListContexts(ctx context.Context, orgID string) ([]*store.Context, error) {
	rows, err := s.query(ctx, contextSelect+` WHERE org_id = ? ORDER BY name`, orgID)
	return collect(rows, err, scanContext)
}

// UpdateContextPolicy applies mutate to a context's policy in one
// transaction, holding the row lock (PostgreSQL) or the write lock (SQLite).
func (s *Store) UpdateContextPolicy(ctx context.Context, orgID, name string, mutate func(c *store.Context) error) error {
	return s.tx(ctx, func(tx conn) error {
		c, err := scanContext(tx.queryRow(ctx, contextSelect+` WHERE org_id = ? AND name = ?`+s.d.forUpdate(), orgID, name))
		if err != nil {
			return err
		}
		if err := mutate(c); err != nil {
			return err
		}
		defaultStrategy(c)
		l, err := contextPolicyArgs(c)
		if err != nil {
			return err
		}
		res, err := tx.exec(ctx, `UPDATE contexts SET enabled = ?, branch_restrictions = ?::jsonb, required_reviewers = ?::jsonb,
			wait_timer_seconds = ?, hold_expiry_seconds = ?, minimum_trust = ?, allow_local_execution = ?,
			trigger_type_filters = ?::jsonb, repo_patterns = ?::jsonb, allow_untrusted = ?, concurrency_limit = ?, concurrency_strategy = ?,
			concurrency_timeout_ms = ?, updated_at = ?
			WHERE id = ?`, c.Enabled, l.branches, l.reviewers, int64Arg(c.WaitTimerSeconds), int64Arg(c.HoldExpirySeconds),
			strArg(c.MinimumTrust), c.AllowLocalExecution, l.triggers, l.repos, c.AllowUntrusted, int64Arg(c.ConcurrencyLimit),
			c.ConcurrencyStrategy, int64Arg(c.ConcurrencyTimeoutMs), s.d.ts(now()), c.ID)
		return affected(res, err)
	})
}

// DeleteContext deletes a context; bindings, variables and source overrides
// cascade. It takes the context-name lock CreateHeldRun also takes (on
// SQLite the transaction's write lock), so the pending-hold count and the
// delete cannot interleave with the creation of a hold naming the context.
func (s *Store) DeleteContext(ctx context.Context, orgID, name string) error {
	return mapErr(s.tx(ctx, func(tx conn) error {
		if err := tx.lock(ctx, lockClassContext, orgID+"\n"+name); err != nil {
			return err
		}
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		n, err := countPendingHolds(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		if n > 0 {
			return &store.PendingHeldRunsError{Context: name, Count: n}
		}
		res, err := tx.exec(ctx, `DELETE FROM contexts WHERE id = ?`, id)
		return affected(res, err)
	}))
}

// BindContext adds a binding unless an identical one exists.
func (s *Store) BindContext(ctx context.Context, orgID, name, scopePattern, hostPattern string) (bool, error) {
	created := false
	err := s.tx(ctx, func(tx conn) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		created, err = changed(tx.exec(ctx, `INSERT INTO context_bindings (context_id, scope_pattern, host_pattern, created_at) VALUES (?,?,?,?)
			ON CONFLICT (context_id, scope_pattern, host_pattern) DO NOTHING`, id, scopePattern, hostPattern, s.d.ts(now())))
		return err
	})
	return created, mapErr(err)
}

// ListContextBindings returns a context's bindings in creation order.
func (s *Store) ListContextBindings(ctx context.Context, orgID, name string) ([]*store.ContextBinding, error) {
	id, err := contextID(ctx, s.conn, orgID, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, `SELECT scope_pattern, host_pattern, created_at FROM context_bindings WHERE context_id = ? ORDER BY id`, id)
	return collect(rows, err, func(r scanner) (*store.ContextBinding, error) {
		var b store.ContextBinding
		if err := r.Scan(&b.ScopePattern, &b.HostPattern, tcol(&b.CreatedAt)); err != nil {
			return nil, err
		}
		return &b, nil
	})
}

// ListContextVariables returns a context's variables ordered by key.
func (s *Store) ListContextVariables(ctx context.Context, orgID, name string) ([]*store.ContextVariable, error) {
	id, err := contextID(ctx, s.conn, orgID, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, `SELECT key, value, locked, updated_at FROM context_variables WHERE context_id = ? ORDER BY key`, id)
	return collect(rows, err, func(r scanner) (*store.ContextVariable, error) {
		var v store.ContextVariable
		if err := r.Scan(&v.Key, &v.Value, &v.Locked, tcol(&v.UpdatedAt)); err != nil {
			return nil, err
		}
		return &v, nil
	})
}

// PutContextVariable inserts or replaces one variable.
func (s *Store) PutContextVariable(ctx context.Context, orgID, name string, v *store.ContextVariable) error {
	return mapErr(s.tx(ctx, func(tx conn) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		v.UpdatedAt = now()
		_, err = tx.exec(ctx, `INSERT INTO context_variables (context_id, key, value, locked, updated_at) VALUES (?,?,?,?,?)
			ON CONFLICT (context_id, key) DO UPDATE SET value = excluded.value, locked = excluded.locked, updated_at = excluded.updated_at`,
			id, v.Key, v.Value, v.Locked, s.d.ts(v.UpdatedAt))
		return err
	}))
}

// DeleteContextVariable deletes one variable.
func (s *Store) DeleteContextVariable(ctx context.Context, orgID, name, key string) error {
	return mapErr(s.tx(ctx, func(tx conn) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		res, err := tx.exec(ctx, `DELETE FROM context_variables WHERE context_id = ? AND key = ?`, id, key)
		return affected(res, err)
	}))
}

// ListContextSourceOverrides returns a context's source overrides for
// routingKey ("" = all), ordered by routing key then key.
func (s *Store) ListContextSourceOverrides(ctx context.Context, orgID, name, routingKey string) ([]*store.ContextSourceOverride, error) {
	id, err := contextID(ctx, s.conn, orgID, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, `SELECT routing_key, key, value, updated_at FROM context_source_overrides
		WHERE context_id = ?1 AND (?2 = '' OR routing_key = ?2) ORDER BY routing_key, key`, id, routingKey)
	return collect(rows, err, func(r scanner) (*store.ContextSourceOverride, error) {
		var o store.ContextSourceOverride
		if err := r.Scan(&o.RoutingKey, &o.Key, &o.Value, tcol(&o.UpdatedAt)); err != nil {
			return nil, err
		}
		return &o, nil
	})
}

// PutContextSourceOverride inserts or replaces one override and sets
// o.UpdatedAt.
func (s *Store) PutContextSourceOverride(ctx context.Context, orgID, name string, o *store.ContextSourceOverride) error {
	return mapErr(s.tx(ctx, func(tx conn) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		o.UpdatedAt = now()
		_, err = tx.exec(ctx, `INSERT INTO context_source_overrides (context_id, routing_key, key, value, updated_at) VALUES (?,?,?,?,?)
			ON CONFLICT (context_id, routing_key, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			id, o.RoutingKey, o.Key, o.Value, s.d.ts(o.UpdatedAt))
		return err
	}))
}

// DeleteContextSourceOverride deletes one override.
func (s *Store) DeleteContextSourceOverride(ctx context.Context, orgID, name, routingKey, key string) error {
	return mapErr(s.tx(ctx, func(tx conn) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		res, err := tx.exec(ctx, `DELETE FROM context_source_overrides WHERE context_id = ? AND routing_key = ? AND key = ?`,
			id, routingKey, key)
		return affected(res, err)
	}))
}

// AcquireContextSlots takes, for jobID, a slot of every concurrency group
// in limits (group → limit) of org, all or none (KiCI context
// concurrency_limit). Each group's count and insert run under that group's
// lock (an advisory lock on PostgreSQL taken in sorted order, so two
// callers never deadlock; the write lock on SQLite): two callers never both
// see the last free slot of a group.
func (s *Store) AcquireContextSlots(ctx context.Context, orgID, jobID string, limits map[string]int, at time.Time) (bool, error) {
	groups := slices.Sorted(maps.Keys(limits))
	ok := false
	err := s.tx(ctx, func(tx conn) error {
		var missing []string
		for _, grp := range groups {
			if err := tx.lock(ctx, lockClassSlots, orgID+"\n"+grp); err != nil {
				return err
			}
			// Slots of finished (or deleted) jobs never count again; drop
			// them so the group's rows stay few.
			live, liveArgs := inList("j.status", store.TerminalJobStatuses, true)
			if _, err := tx.exec(ctx, `DELETE FROM context_slots WHERE org_id = ? AND grp = ? AND NOT EXISTS (
				SELECT 1 FROM execution_jobs j WHERE j.id = context_slots.job_id AND `+live+`)`,
				append([]any{orgID, grp}, liveArgs...)...); err != nil {
				return err
			}
			var mine int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM context_slots WHERE org_id = ? AND grp = ? AND job_id = ?`,
				orgID, grp, jobID).Scan(&mine); err != nil {
				return err
			}
			if mine > 0 {
				continue
			}
			// Every remaining slot counts until its job ends, also while
			// the job is held: a held job only has a slot when it was just
			// given one and is about to be released.
			var counting int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM context_slots WHERE org_id = ? AND grp = ?`,
				orgID, grp).Scan(&counting); err != nil {
				return err
			}
			if counting >= limits[grp] {
				return nil // one group is full: take none
			}
			missing = append(missing, grp)
		}
		for _, grp := range missing {
			if _, err := tx.exec(ctx, `INSERT INTO context_slots (org_id, grp, job_id, acquired_at) VALUES (?,?,?,?)`,
				orgID, grp, jobID, s.d.ts(at)); err != nil {
				return err
			}
		}
		ok = true
		return nil
	})
	return ok, mapErr(err)
}

// ContextSlotRuns implements store.ContextStore.
func (s *Store) ContextSlotRuns(ctx context.Context, orgID, grp string) ([]string, error) {
	live, liveArgs := inList("j.status", store.TerminalJobStatuses, true)
	rows, err := s.query(ctx, `SELECT j.run_id FROM context_slots c JOIN execution_jobs j ON j.id = c.job_id
		WHERE c.org_id = ? AND c.grp = ? AND `+live+`
		GROUP BY j.run_id ORDER BY MIN(c.acquired_at), j.run_id`, append([]any{orgID, grp}, liveArgs...)...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, id)
	}
	return out, mapErr(rows.Err())
}
