package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/store"
)

var _ store.ContextStore = (*Store)(nil)

// lockClassSlots is the advisory-lock class (next to those in holds.go) of
// a concurrency group of an org: AcquireContextSlot callers of one group.
const lockClassSlots = 0x6b6303

const contextInsertCols = `id, org_id, name, type, glob_pattern, enabled, branch_restrictions, required_reviewers,
	wait_timer_seconds, hold_expiry_seconds, minimum_trust, allow_local_execution, trigger_type_filters, repo_patterns,
	allow_untrusted, concurrency_limit, concurrency_strategy, concurrency_timeout_ms, created_by, created_at, updated_at`

const contextSelectCols = `id, org_id, name, type, glob_pattern, enabled, branch_restrictions::text, required_reviewers::text,
	wait_timer_seconds, hold_expiry_seconds, minimum_trust, allow_local_execution, trigger_type_filters::text,
	repo_patterns::text, allow_untrusted, concurrency_limit, concurrency_strategy, concurrency_timeout_ms, created_by,
	created_at, updated_at`

func scanContext(r scanner) (*store.Context, error) {
	var c store.Context
	var branches, triggers, repos string
	var reviewers, trust *string
	if err := r.Scan(&c.ID, &c.OrgID, &c.Name, &c.Type, &c.GlobPattern, &c.Enabled, &branches, &reviewers,
		&c.WaitTimerSeconds, &c.HoldExpirySeconds, &trust, &c.AllowLocalExecution, &triggers, &repos, &c.AllowUntrusted,
		&c.ConcurrencyLimit, &c.ConcurrencyStrategy, &c.ConcurrencyTimeoutMs, &c.CreatedBy, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, mapErr(err)
	}
	for _, l := range []struct {
		raw string
		dst *[]string
	}{{branches, &c.BranchRestrictions}, {triggers, &c.TriggerTypeFilters}, {repos, &c.RepoPatterns}} {
		if err := json.Unmarshal([]byte(l.raw), l.dst); err != nil {
			return nil, err
		}
		*l.dst = nonNil(*l.dst)
	}
	if reviewers != nil {
		c.RequiredReviewers = []string{}
		if err := json.Unmarshal([]byte(*reviewers), &c.RequiredReviewers); err != nil {
			return nil, err
		}
	}
	c.MinimumTrust = trust
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

// contextLists are the stored JSON forms of a context's list fields.
type contextLists struct {
	branches, triggers, repos string
	reviewers                 *string // NULL: no approval required
}

// contextPolicyArgs returns the stored JSON forms of c's list fields; a nil
// never-nil list is stored as [].
func contextPolicyArgs(c *store.Context) (l contextLists, err error) {
	for _, f := range []struct {
		v   []string
		dst *string
	}{{c.BranchRestrictions, &l.branches}, {c.TriggerTypeFilters, &l.triggers}, {c.RepoPatterns, &l.repos}} {
		b, err := json.Marshal(nonNil(f.v))
		if err != nil {
			return l, err
		}
		*f.dst = string(b)
	}
	if c.RequiredReviewers != nil {
		r, err := json.Marshal(c.RequiredReviewers)
		if err != nil {
			return l, err
		}
		s := string(r)
		l.reviewers = &s
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

func contextID(ctx context.Context, q pgExecQueryer, orgID, name string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM contexts WHERE org_id = $1 AND name = $2`, orgID, name).Scan(&id)
	return id, mapErr(err)
}

func upsertContextVar(ctx context.Context, q pgExecQueryer, id string, v *store.ContextVariable) error {
	_, err := q.Exec(ctx, `INSERT INTO context_variables (context_id, key, value, locked, updated_at) VALUES ($1,$2,$3,$4,$5)
		ON CONFLICT (context_id, key) DO UPDATE SET value = EXCLUDED.value, locked = EXCLUDED.locked, updated_at = EXCLUDED.updated_at`,
		id, v.Key, v.Value, v.Locked, ts(v.UpdatedAt))
	return err
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
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t := now()
		existing, err := scanContext(tx.QueryRow(ctx, `SELECT `+contextSelectCols+` FROM contexts WHERE org_id = $1 AND name = $2 FOR UPDATE`, c.OrgID, c.Name))
		switch {
		case errors.Is(err, store.ErrNotFound):
			created = true
			c.ID = uuid.NewString()
			c.CreatedAt, c.UpdatedAt = t, t
			if _, err := tx.Exec(ctx, `INSERT INTO contexts (`+contextInsertCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7::jsonb,$8::jsonb,$9,$10,$11,$12,$13::jsonb,$14::jsonb,$15,$16,$17,$18,$19,$20,$21)`,
				c.ID, c.OrgID, c.Name, c.Type, c.GlobPattern, c.Enabled, l.branches, l.reviewers, c.WaitTimerSeconds,
				c.HoldExpirySeconds, c.MinimumTrust, c.AllowLocalExecution, l.triggers, l.repos, c.AllowUntrusted,
				c.ConcurrencyLimit, c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs, c.CreatedBy, t, t); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			c.ID, c.CreatedBy, c.CreatedAt, c.UpdatedAt = existing.ID, existing.CreatedBy, existing.CreatedAt, t
			if _, err := tx.Exec(ctx, `UPDATE contexts SET type = $1, glob_pattern = $2, enabled = $3, branch_restrictions = $4::jsonb,
				required_reviewers = $5::jsonb, wait_timer_seconds = $6, hold_expiry_seconds = $7, minimum_trust = $8, allow_local_execution = $9,
				trigger_type_filters = $10::jsonb, repo_patterns = $11::jsonb, allow_untrusted = $12, concurrency_limit = $13,
				concurrency_strategy = $14, concurrency_timeout_ms = $15, updated_at = $16 WHERE id = $17`,
				c.Type, c.GlobPattern, c.Enabled, l.branches, l.reviewers, c.WaitTimerSeconds, c.HoldExpirySeconds, c.MinimumTrust,
				c.AllowLocalExecution, l.triggers, l.repos, c.AllowUntrusted, c.ConcurrencyLimit, c.ConcurrencyStrategy,
				c.ConcurrencyTimeoutMs, t, c.ID); err != nil {
				return err
			}
		}
		for k, v := range vars {
			if err := upsertContextVar(ctx, tx, c.ID, &store.ContextVariable{Key: k, Value: v, UpdatedAt: t}); err != nil {
				return err
			}
		}
		return nil
	})
	return created, mapErr(err)
}

// GetContext returns one context.
func (s *Store) GetContext(ctx context.Context, orgID, name string) (*store.Context, error) {
	return scanContext(s.pool.QueryRow(ctx, `SELECT `+contextSelectCols+` FROM contexts WHERE org_id = $1 AND name = $2`, orgID, name))
}

// ListContexts returns the contexts of org ordered by name.
func (s *Store) ListContexts(ctx context.Context, orgID string) ([]*store.Context, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+contextSelectCols+` FROM contexts WHERE org_id = $1 ORDER BY name`, orgID)
	return collect(rows, err, scanContext)
}

// UpdateContextPolicy applies mutate to a context's policy in one
// transaction, holding the row lock.
func (s *Store) UpdateContextPolicy(ctx context.Context, orgID, name string, mutate func(c *store.Context) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := scanContext(tx.QueryRow(ctx, `SELECT `+contextSelectCols+` FROM contexts WHERE org_id = $1 AND name = $2 FOR UPDATE`, orgID, name))
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
		return affected(tx.Exec(ctx, `UPDATE contexts SET enabled = $1, branch_restrictions = $2::jsonb, required_reviewers = $3::jsonb,
			wait_timer_seconds = $4, hold_expiry_seconds = $5, minimum_trust = $6, allow_local_execution = $7,
			trigger_type_filters = $8::jsonb, repo_patterns = $9::jsonb, allow_untrusted = $10, concurrency_limit = $11,
			concurrency_strategy = $12, concurrency_timeout_ms = $13, updated_at = $14 WHERE id = $15`, c.Enabled, l.branches,
			l.reviewers, c.WaitTimerSeconds, c.HoldExpirySeconds, c.MinimumTrust, c.AllowLocalExecution, l.triggers, l.repos,
			c.AllowUntrusted, c.ConcurrencyLimit, c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs, now(), c.ID))
	})
}

// DeleteContext deletes a context; bindings, variables and source overrides
// cascade. It takes the context-name advisory lock CreateHeldRun also
// takes, so the pending-hold count and the delete cannot interleave with
// the creation of a hold naming the context.
func (s *Store) DeleteContext(ctx context.Context, orgID, name string) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockContextName(ctx, tx, orgID, name); err != nil {
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
		return affected(tx.Exec(ctx, `DELETE FROM contexts WHERE id = $1`, id))
	}))
}

// BindContext adds a binding unless an identical one exists.
func (s *Store) BindContext(ctx context.Context, orgID, name, scopePattern, hostPattern string) (bool, error) {
	created := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		created, err = changed(tx.Exec(ctx, `INSERT INTO context_bindings (context_id, scope_pattern, host_pattern, created_at) VALUES ($1,$2,$3,$4)
			ON CONFLICT (context_id, scope_pattern, host_pattern) DO NOTHING`, id, scopePattern, hostPattern, now()))
		return err
	})
	return created, mapErr(err)
}

// ListContextBindings returns a context's bindings in creation order.
func (s *Store) ListContextBindings(ctx context.Context, orgID, name string) ([]*store.ContextBinding, error) {
	id, err := contextID(ctx, s.pool, orgID, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT scope_pattern, host_pattern, created_at FROM context_bindings WHERE context_id = $1 ORDER BY id`, id)
	return collect(rows, err, func(r scanner) (*store.ContextBinding, error) {
		var b store.ContextBinding
		if err := r.Scan(&b.ScopePattern, &b.HostPattern, &b.CreatedAt); err != nil {
			return nil, err
		}
		b.CreatedAt = b.CreatedAt.UTC()
		return &b, nil
	})
}

// ListContextVariables returns a context's variables ordered by key.
func (s *Store) ListContextVariables(ctx context.Context, orgID, name string) ([]*store.ContextVariable, error) {
	id, err := contextID(ctx, s.pool, orgID, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT key, value, locked, updated_at FROM context_variables WHERE context_id = $1 ORDER BY key`, id)
	return collect(rows, err, func(r scanner) (*store.ContextVariable, error) {
		var v store.ContextVariable
		if err := r.Scan(&v.Key, &v.Value, &v.Locked, &v.UpdatedAt); err != nil {
			return nil, err
		}
		v.UpdatedAt = v.UpdatedAt.UTC()
		return &v, nil
	})
}

// PutContextVariable inserts or replaces one variable.
func (s *Store) PutContextVariable(ctx context.Context, orgID, name string, v *store.ContextVariable) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		v.UpdatedAt = now()
		return upsertContextVar(ctx, tx, id, v)
	}))
}

// DeleteContextVariable deletes one variable.
func (s *Store) DeleteContextVariable(ctx context.Context, orgID, name, key string) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		return affected(tx.Exec(ctx, `DELETE FROM context_variables WHERE context_id = $1 AND key = $2`, id, key))
	}))
}

// ListContextSourceOverrides returns a context's source overrides for
// routingKey ("" = all), ordered by routing key then key.
func (s *Store) ListContextSourceOverrides(ctx context.Context, orgID, name, routingKey string) ([]*store.ContextSourceOverride, error) {
	id, err := contextID(ctx, s.pool, orgID, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT routing_key, key, value, updated_at FROM context_source_overrides
		WHERE context_id = $1 AND ($2 = '' OR routing_key = $2) ORDER BY routing_key, key`, id, routingKey)
	return collect(rows, err, func(r scanner) (*store.ContextSourceOverride, error) {
		var o store.ContextSourceOverride
		if err := r.Scan(&o.RoutingKey, &o.Key, &o.Value, &o.UpdatedAt); err != nil {
			return nil, err
		}
		o.UpdatedAt = o.UpdatedAt.UTC()
		return &o, nil
	})
}

// PutContextSourceOverride inserts or replaces one override and sets
// o.UpdatedAt.
func (s *Store) PutContextSourceOverride(ctx context.Context, orgID, name string, o *store.ContextSourceOverride) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		o.UpdatedAt = now()
		_, err = tx.Exec(ctx, `INSERT INTO context_source_overrides (context_id, routing_key, key, value, updated_at) VALUES ($1,$2,$3,$4,$5)
			ON CONFLICT (context_id, routing_key, key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
			id, o.RoutingKey, o.Key, o.Value, ts(o.UpdatedAt))
		return err
	}))
}

// DeleteContextSourceOverride deletes one override.
func (s *Store) DeleteContextSourceOverride(ctx context.Context, orgID, name, routingKey, key string) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, err := contextID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		return affected(tx.Exec(ctx, `DELETE FROM context_source_overrides WHERE context_id = $1 AND routing_key = $2 AND key = $3`,
			id, routingKey, key))
	}))
}

// AcquireContextSlots takes, for jobID, a slot of every concurrency group
// in limits (group → limit) of org, all or none (KiCI context
// concurrency_limit). Each group's count and insert run under that group's
// transaction-scoped advisory lock, taken in sorted order so two callers
// never deadlock, and never both see the last free slot of a group.
func (s *Store) AcquireContextSlots(ctx context.Context, orgID, jobID string, limits map[string]int, at time.Time) (bool, error) {
	groups := slices.Sorted(maps.Keys(limits))
	ok := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var missing []string
		for _, grp := range groups {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockClassSlots, orgID+"\n"+grp); err != nil {
				return err
			}
			// Slots of finished (or deleted) jobs never count again; drop
			// them so the group's rows stay few.
			if _, err := tx.Exec(ctx, `DELETE FROM context_slots s WHERE s.org_id = $1 AND s.grp = $2 AND NOT EXISTS (
				SELECT 1 FROM execution_jobs j WHERE j.id = s.job_id AND NOT (j.status = ANY($3::text[])))`,
				orgID, grp, store.TerminalJobStatuses); err != nil {
				return err
			}
			var mine bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM context_slots WHERE org_id = $1 AND grp = $2 AND job_id = $3)`,
				orgID, grp, jobID).Scan(&mine); err != nil {
				return err
			}
			if mine {
				continue
			}
			// Every remaining slot counts until its job ends, also while
			// the job is held: a held job only has a slot when it was just
			// given one and is about to be released.
			var counting int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM context_slots WHERE org_id = $1 AND grp = $2`,
				orgID, grp).Scan(&counting); err != nil {
				return err
			}
			if counting >= limits[grp] {
				return nil // one group is full: take none
			}
			missing = append(missing, grp)
		}
		for _, grp := range missing {
			if _, err := tx.Exec(ctx, `INSERT INTO context_slots (org_id, grp, job_id, acquired_at) VALUES ($1,$2,$3,$4)`,
				orgID, grp, jobID, ts(at)); err != nil {
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
	rows, err := s.pool.Query(ctx, `SELECT j.run_id FROM context_slots c JOIN execution_jobs j ON j.id = c.job_id
		WHERE c.org_id = $1 AND c.grp = $2 AND NOT (j.status = ANY($3::text[]))
		GROUP BY j.run_id ORDER BY MIN(c.acquired_at), j.run_id`, orgID, grp, store.TerminalJobStatuses)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr(err)
}
