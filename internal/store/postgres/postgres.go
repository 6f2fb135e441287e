// Package postgres is the PostgreSQL implementation of store.Store, on
// pgx/v5 with a pgxpool connection pool.
//
// Claims use one statement, UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP
// LOCKED LIMIT 1) RETURNING …, so concurrent claimants never get the same
// entry and never block each other. Times are timestamptz written at
// millisecond precision and read back in UTC. Labels, needs and matrix
// values are jsonb (SQL NULL stands for a Go nil, "[]"/"{}" for an empty
// list or map); job config and decision traces are stored verbatim as text,
// delivery payloads as bytea. Schema migrations (goose, embedded) are
// applied by Open.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlstore"
)

//go:embed migrations/postgres/*.sql
var migrationsFS embed.FS

// Store is the PostgreSQL store.Store. It is safe for concurrent use.
type Store struct {
	*sqlstore.Store
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or key=value
// DSN), checks the connection and applies the embedded migrations.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	m, err := Migrations(db)
	if err == nil {
		err = m.Up(ctx)
	}
	if err != nil {
		db.Close()
		pool.Close()
		return nil, err
	}
	return &Store{Store: sqlstore.New(db, sqlstore.Postgres(), pool.Close), pool: pool}, nil
}

// Migrations returns the embedded PostgreSQL migrations bound to db.
func Migrations(db *sql.DB) (*sqlstore.Migrations, error) {
	fsys, err := fs.Sub(migrationsFS, "migrations/postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	return sqlstore.NewMigrations(db, sqlstore.Postgres(), fsys)
}

// Pool returns the underlying connection pool (for diagnostics and tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }


// ---------------------------------------------------------------- helpers

type scanner interface{ Scan(dest ...any) error }

// mapErr turns driver errors into store.ErrConflict / store.ErrNotFound.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w: %v", store.ErrConflict, err)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%w: %v", store.ErrNotFound, err)
		}
	}
	return err
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// ts is the stored form of a time: UTC, millisecond precision.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func tsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func strArg(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func int64Arg(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// jsonArg encodes v as JSON text for a jsonb column, or NULL when isNil.
func jsonArg(v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func rawArg(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return string(r)
}

func rawFrom(v *string) json.RawMessage {
	if v == nil || *v == "" {
		return nil
	}
	return json.RawMessage(*v)
}

func decodeJSON(b []byte, dst any) error {
	if b == nil {
		return nil
	}
	return json.Unmarshal(b, dst)
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// statusCond is a condition on column `status` for a transition: status in
// from, or (nil from) status not terminal. arg is the $N index to use.
func statusCond(from []string, terminal []string, arg int) (string, any) {
	if from == nil {
		return fmt.Sprintf("NOT (status = ANY($%d::text[]))", arg), terminal
	}
	return fmt.Sprintf("status = ANY($%d::text[])", arg), from
}

func affected(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

func changed(tag pgconn.CommandTag, err error) (bool, error) {
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() > 0, nil
}

func collect[T any](rows pgx.Rows, err error, scan func(scanner) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ---------------------------------------------------------------- runs

const runCols = `id, workflow_name, status, provider, repo_identifier, repo_url, ref, sha, delivery_id, source_id, org_id, triggered_by, failure_reason, timeout_ms, created_at, started_at, completed_at, duration_ms, trigger_type, target_branch, trust_tier, lock_file_source`

func scanRun(r scanner) (*store.Run, error) {
	var run store.Run
	if err := r.Scan(&run.ID, &run.WorkflowName, &run.Status, &run.Provider, &run.RepoIdentifier, &run.RepoURL,
		&run.Ref, &run.SHA, &run.DeliveryID, &run.SourceID, &run.OrgID, &run.TriggeredBy, &run.FailureReason,
		&run.TimeoutMs, &run.CreatedAt, &run.StartedAt, &run.CompletedAt, &run.DurationMs, &run.TriggerType,
		&run.TargetBranch, &run.TrustTier, &run.LockFileSource); err != nil {
		return nil, mapErr(err)
	}
	run.CreatedAt = run.CreatedAt.UTC()
	run.StartedAt = utc(run.StartedAt)
	run.CompletedAt = utc(run.CompletedAt)
	return &run, nil
}

const jobCols = `id, run_id, job_name, base_job_name, matrix_values, status, agent_id, config, runs_on_labels, needs, error_message, pending_reason, timeout_ms, created_at, started_at, completed_at, duration_ms, last_heartbeat_at`

func scanJob(r scanner) (*store.Job, error) {
	var j store.Job
	var matrix, labels, needs []byte
	var config *string
	if err := r.Scan(&j.ID, &j.RunID, &j.JobName, &j.BaseJobName, &matrix, &j.Status, &j.AgentID, &config,
		&labels, &needs, &j.ErrorMessage, &j.PendingReason, &j.TimeoutMs, &j.CreatedAt, &j.StartedAt,
		&j.CompletedAt, &j.DurationMs, &j.LastHeartbeatAt); err != nil {
		return nil, mapErr(err)
	}
	if err := decodeJSON(matrix, &j.MatrixValues); err != nil {
		return nil, fmt.Errorf("postgres: job %s matrix_values: %w", j.ID, err)
	}
	if err := decodeJSON(labels, &j.RunsOnLabels); err != nil {
		return nil, fmt.Errorf("postgres: job %s runs_on_labels: %w", j.ID, err)
	}
	if err := decodeJSON(needs, &j.Needs); err != nil {
		return nil, fmt.Errorf("postgres: job %s needs: %w", j.ID, err)
	}
	j.Config = rawFrom(config)
	j.CreatedAt = j.CreatedAt.UTC()
	j.StartedAt = utc(j.StartedAt)
	j.CompletedAt = utc(j.CompletedAt)
	j.LastHeartbeatAt = utc(j.LastHeartbeatAt)
	return &j, nil
}

// CreateRun inserts a run with its jobs in one transaction; either all rows
// exist afterwards or none (ErrConflict on a duplicate run or job id).
// Defaults written back to the arguments: run status "pending", zero
// CreatedAt = now; job RunID = run.ID, status "pending", zero CreatedAt =
// the run's.
func (s *Store) CreateRun(ctx context.Context, run *store.Run, jobs []*store.Job) error {
	if run.Status == "" {
		run.Status = "pending"
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = now()
	}
	for _, j := range jobs {
		j.RunID = run.ID
		if j.Status == "" {
			j.Status = "pending"
		}
		if j.CreatedAt.IsZero() {
			j.CreatedAt = run.CreatedAt
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO execution_runs (`+runCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22)`,
			run.ID, run.WorkflowName, run.Status, run.Provider, run.RepoIdentifier, run.RepoURL, run.Ref, run.SHA,
			run.DeliveryID, run.SourceID, run.OrgID, run.TriggeredBy, run.FailureReason, run.TimeoutMs,
			ts(run.CreatedAt), tsPtr(run.StartedAt), tsPtr(run.CompletedAt), int64Arg(run.DurationMs),
			run.TriggerType, run.TargetBranch, run.TrustTier, run.LockFileSource); err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		batch := &pgx.Batch{}
		for i, j := range jobs {
			matrix, err := jsonArg(j.MatrixValues, j.MatrixValues == nil)
			if err != nil {
				return err
			}
			labels, err := jsonArg(j.RunsOnLabels, j.RunsOnLabels == nil)
			if err != nil {
				return err
			}
			needs, err := jsonArg(j.Needs, j.Needs == nil)
			if err != nil {
				return err
			}
			batch.Queue(`INSERT INTO execution_jobs (seq, `+jobCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19)`,
				i, j.ID, j.RunID, j.JobName, j.BaseJobName, matrix, j.Status, j.AgentID, rawArg(j.Config), labels,
				needs, j.ErrorMessage, j.PendingReason, j.TimeoutMs, ts(j.CreatedAt), tsPtr(j.StartedAt),
				tsPtr(j.CompletedAt), int64Arg(j.DurationMs), tsPtr(j.LastHeartbeatAt))
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	return mapErr(err)
}

// GetRun returns a run by id, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	return scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM execution_runs WHERE id = $1`, id))
}

// ListRuns returns runs matching f, newest first (created_at desc, then id
// desc), and the total count of matches ignoring Limit/Offset. Limit <= 0
// means 20.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]*store.Run, int, error) {
	var c conds
	if len(f.Statuses) > 0 {
		c.add("status = ANY($%d::text[])", f.Statuses)
	}
	if f.WorkflowName != "" {
		c.add("workflow_name = $%d", f.WorkflowName)
	}
	if f.Repo != "" {
		c.add("repo_identifier = $%d", f.Repo)
	}
	if f.DeliveryID != "" {
		c.add("delivery_id = $%d", f.DeliveryID)
	}
	if f.Since != nil {
		c.add("created_at > $%d", ts(*f.Since))
	}
	if f.RoutingKey != "" {
		c.add("source_id IN (SELECT id FROM sources WHERE routing_key = $%d)", f.RoutingKey)
	}
	if f.SourceID != "" {
		c.add("source_id = $%d", f.SourceID)
	}
	if f.TriggerType != "" {
		c.add("trigger_type = $%d", f.TriggerType)
	}
	if f.Branch != "" {
		c.add("$%d IN (target_branch, CASE WHEN ref LIKE 'refs/heads/%%' THEN substr(ref, 12) END)", f.Branch)
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM execution_runs`+c.where(), c.args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	page, args := c.page(store.PageLimit(f.Limit, 20, 0), max(f.Offset, 0))
	rows, err := s.pool.Query(ctx, `SELECT `+runCols+` FROM execution_runs`+c.where()+
		` ORDER BY created_at DESC, id DESC`+page, args...)
	runs, err := collect(rows, err, scanRun)
	if err != nil {
		return nil, 0, err
	}
	return runs, total, nil
}

// UpdateRunStatus moves a run to `to` only if its status is in `from` (nil
// from = any non-terminal status) and writes the non-nil fields of u;
// FailureReason only when the stored one is empty. Reports whether a row
// changed.
func (s *Store) UpdateRunStatus(ctx context.Context, id string, from []string, to string, u store.RunUpdate) (bool, error) {
	cond, condArg := statusCond(from, store.TerminalRunStatuses, 7)
	return changed(s.pool.Exec(ctx, `UPDATE execution_runs SET status = $1,
		failure_reason = CASE WHEN failure_reason = '' THEN COALESCE($2::text, '') ELSE failure_reason END,
		started_at = COALESCE($3::timestamptz, started_at),
		completed_at = COALESCE($4::timestamptz, completed_at),
		duration_ms = COALESCE($5::bigint, duration_ms)
		WHERE id = $6 AND `+cond,
		to, strArg(u.FailureReason), tsPtr(u.StartedAt), tsPtr(u.CompletedAt), int64Arg(u.DurationMs), id, condArg))
}

// ---------------------------------------------------------------- jobs

// GetJob returns a job by id, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id string) (*store.Job, error) {
	return scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM execution_jobs WHERE id = $1`, id))
}

// ListJobs returns a run's jobs in creation order (the order given to
// CreateRun).
func (s *Store) ListJobs(ctx context.Context, runID string) ([]*store.Job, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+jobCols+` FROM execution_jobs WHERE run_id = $1 ORDER BY seq`, runID)
	return collect(rows, err, scanJob)
}

// ListJobsByStatus returns jobs in any of the statuses, oldest first.
func (s *Store) ListJobsByStatus(ctx context.Context, statuses []string) ([]*store.Job, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+jobCols+` FROM execution_jobs
		WHERE status = ANY($1::text[]) ORDER BY created_at, run_id, seq`, nonNil(statuses))
	return collect(rows, err, scanJob)
}

// UpdateJobStatus moves a job to `to` only if its status is in `from` (nil
// from = any non-terminal status) and writes the non-nil fields of u.
// Reports whether a row changed.
func (s *Store) UpdateJobStatus(ctx context.Context, id string, from []string, to string, u store.JobUpdate) (bool, error) {
	cond, condArg := statusCond(from, store.TerminalJobStatuses, 10)
	return changed(s.pool.Exec(ctx, `UPDATE execution_jobs SET status = $1,
		agent_id = COALESCE($2::text, agent_id),
		error_message = COALESCE($3::text, error_message),
		pending_reason = COALESCE($4::text, pending_reason),
		started_at = COALESCE($5::timestamptz, started_at),
		completed_at = COALESCE($6::timestamptz, completed_at),
		duration_ms = COALESCE($7::bigint, duration_ms),
		last_heartbeat_at = COALESCE($8::timestamptz, last_heartbeat_at)
		WHERE id = $9 AND `+cond,
		to, strArg(u.AgentID), strArg(u.ErrorMessage), strArg(u.PendingReason), tsPtr(u.StartedAt),
		tsPtr(u.CompletedAt), int64Arg(u.DurationMs), tsPtr(u.LastHeartbeatAt), id, condArg))
}

// TouchJobHeartbeat sets last_heartbeat_at=at for a running (or
// cancelling) job; ErrNotFound when no such job is in those statuses.
func (s *Store) TouchJobHeartbeat(ctx context.Context, id string, at time.Time) error {
	return affected(s.pool.Exec(ctx, `UPDATE execution_jobs SET last_heartbeat_at = $1 WHERE id = $2 AND status IN ('running', 'cancelling')`,
		ts(at), id))
}

// ---------------------------------------------------------------- steps

const stepCols = `job_id, step_index, run_id, step_name, status, exit_code, error_message, log_bytes, started_at, completed_at, duration_ms`

// upsertStepSQL keeps a terminal status against a later non-terminal report
// ("stale"); other fields take the new non-empty value unless the report is
// stale, in which case they only fill empty ones. log_bytes only grows.
var upsertStepSQL = func() string {
	term := "'" + strings.Join(store.TerminalStepStatuses, "','") + "'"
	stale := "(execution_steps.status IN (" + term + ") AND excluded.status NOT IN (" + term + "))"
	pick := func(col, empty string) string {
		o, n := "execution_steps."+col, "excluded."+col
		return fmt.Sprintf("%s = CASE WHEN %s THEN %s WHEN %s THEN %s WHEN %s THEN %s ELSE %s END",
			col, fmt.Sprintf(empty, n), o, fmt.Sprintf(empty, o), n, stale, o, n)
	}
	str := "%s = ''"
	null := "%s IS NULL"
	sets := []string{
		"status = CASE WHEN " + stale + " THEN execution_steps.status ELSE excluded.status END",
		pick("run_id", str),
		pick("step_name", str),
		pick("exit_code", null),
		pick("error_message", str),
		"log_bytes = GREATEST(execution_steps.log_bytes, excluded.log_bytes)",
		pick("started_at", null),
		pick("completed_at", null),
		pick("duration_ms", null),
	}
	return `INSERT INTO execution_steps (` + stepCols + `) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)
		ON CONFLICT (job_id, step_index) DO UPDATE SET ` + strings.Join(sets, ",\n")
}()

// UpsertStep inserts or updates the step row keyed by (JobID, StepIndex). A
// terminal step status is never overwritten by a non-terminal one (the late
// report then only fills empty fields); otherwise non-empty fields of s
// replace stored ones. LogBytes only grows. ErrNotFound if the job does not
// exist.
func (s *Store) UpsertStep(ctx context.Context, st *store.Step) error {
	var exit any
	if st.ExitCode != nil {
		exit = int32(*st.ExitCode)
	}
	_, err := s.pool.Exec(ctx, upsertStepSQL, st.JobID, st.StepIndex, st.RunID, st.StepName, st.Status, exit,
		st.ErrorMessage, st.LogBytes, tsPtr(st.StartedAt), tsPtr(st.CompletedAt), int64Arg(st.DurationMs))
	return mapErr(err)
}

func scanStep(r scanner) (*store.Step, error) {
	var st store.Step
	var exit *int32
	if err := r.Scan(&st.JobID, &st.StepIndex, &st.RunID, &st.StepName, &st.Status, &exit, &st.ErrorMessage,
		&st.LogBytes, &st.StartedAt, &st.CompletedAt, &st.DurationMs); err != nil {
		return nil, mapErr(err)
	}
	if exit != nil {
		c := int(*exit)
		st.ExitCode = &c
	}
	st.StartedAt = utc(st.StartedAt)
	st.CompletedAt = utc(st.CompletedAt)
	return &st, nil
}

// ListSteps returns a job's steps by index.
func (s *Store) ListSteps(ctx context.Context, jobID string) ([]*store.Step, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+stepCols+` FROM execution_steps WHERE job_id = $1 ORDER BY step_index`, jobID)
	return collect(rows, err, scanStep)
}

// ---------------------------------------------------------------- queue

const queueCols = `id, run_id, job_name, runs_on_labels, exclude_labels, status, agent_id, dispatch_attempts, ack_deadline, pinned_agent_id, created_at`

func scanQueue(r scanner) (*store.QueueEntry, error) {
	var e store.QueueEntry
	var labels, exclude []byte
	if err := r.Scan(&e.ID, &e.RunID, &e.JobName, &labels, &exclude, &e.Status, &e.AgentID, &e.Attempts,
		&e.AckDeadline, &e.PinnedAgentID, &e.CreatedAt); err != nil {
		return nil, mapErr(err)
	}
	if err := decodeJSON(labels, &e.RunsOnLabels); err != nil {
		return nil, fmt.Errorf("postgres: queue %s runs_on_labels: %w", e.ID, err)
	}
	if err := decodeJSON(exclude, &e.ExcludeLabels); err != nil {
		return nil, fmt.Errorf("postgres: queue %s exclude_labels: %w", e.ID, err)
	}
	e.AckDeadline = utc(e.AckDeadline)
	e.CreatedAt = e.CreatedAt.UTC()
	return &e, nil
}

// claimed returns the entry of a claiming UPDATE … RETURNING, or nil.
func claimed(row pgx.Row) (*store.QueueEntry, error) {
	e, err := scanQueue(row)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return e, err
}

// Enqueue inserts an entry (status "pending" when empty; zero CreatedAt =
// now); ErrConflict if the id exists.
func (s *Store) Enqueue(ctx context.Context, e *store.QueueEntry) error {
	if e.Status == "" {
		e.Status = store.QueuePending
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now()
	}
	labels, err := jsonArg(e.RunsOnLabels, e.RunsOnLabels == nil)
	if err != nil {
		return err
	}
	exclude, err := jsonArg(e.ExcludeLabels, e.ExcludeLabels == nil)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO dispatch_queue (`+queueCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
		e.ID, e.RunID, e.JobName, labels, exclude, e.Status, e.AgentID, e.Attempts, tsPtr(e.AckDeadline),
		e.PinnedAgentID, ts(e.CreatedAt))
	return mapErr(err)
}

// claimNextSQL claims in one statement: the sub-select locks the oldest
// matching pending row, skipping rows other claimants hold.
const claimNextSQL = `UPDATE dispatch_queue
	SET status = 'dispatched', agent_id = $1, ack_deadline = $3
	WHERE status = 'pending' AND id = (
		SELECT q.id FROM dispatch_queue q
		WHERE q.status = 'pending'
		  AND (q.pinned_agent_id = '' OR q.pinned_agent_id = $1)
		  AND COALESCE(q.runs_on_labels, '[]'::jsonb) <@ $2::jsonb
		  AND NOT (COALESCE(q.exclude_labels, '[]'::jsonb) ?| $4::text[])
		ORDER BY q.created_at, q.seq
		FOR UPDATE SKIP LOCKED
		LIMIT 1)
	RETURNING ` + queueCols

// ClaimNext atomically claims the oldest pending entry an agent with labels
// may take (RunsOnLabels ⊆ labels, no ExcludeLabels in labels, PinnedAgentID
// empty or agentID), marks it dispatched to agentID with ackDeadline and
// returns it; (nil, nil) when nothing fits.
func (s *Store) ClaimNext(ctx context.Context, agentID string, labels []string, ackDeadline time.Time) (*store.QueueEntry, error) {
	labels = nonNil(labels)
	labelsJSON, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	return claimed(s.pool.QueryRow(ctx, claimNextSQL, agentID, string(labelsJSON), ts(ackDeadline), labels))
}

// ClaimByID claims one specific pending entry for agentID (pins and labels
// are the caller's business); (nil, nil) if it is no longer pending.
func (s *Store) ClaimByID(ctx context.Context, id, agentID string, ackDeadline time.Time) (*store.QueueEntry, error) {
	return claimed(s.pool.QueryRow(ctx, `UPDATE dispatch_queue
		SET status = 'dispatched', agent_id = $1, ack_deadline = $2
		WHERE id = $3 AND status = 'pending' RETURNING `+queueCols, agentID, ts(ackDeadline), id))
}

// AckQueueEntry clears the ack deadline of an entry dispatched to agentID;
// ErrNotFound when no such dispatched entry exists.
func (s *Store) AckQueueEntry(ctx context.Context, id, agentID string) error {
	return affected(s.pool.Exec(ctx, `UPDATE dispatch_queue SET ack_deadline = NULL
		WHERE id = $1 AND agent_id = $2 AND status = 'dispatched'`, id, agentID))
}

// RequeueEntry moves a dispatched entry back to pending (clearing agent and
// ack deadline) and increments Attempts; reports the new attempt count, or
// ok=false if the entry is not dispatched.
func (s *Store) RequeueEntry(ctx context.Context, id string) (int, bool, error) {
	var attempts int
	err := s.pool.QueryRow(ctx, `UPDATE dispatch_queue
		SET status = 'pending', agent_id = '', ack_deadline = NULL, dispatch_attempts = dispatch_attempts + 1
		WHERE id = $1 AND status = 'dispatched' RETURNING dispatch_attempts`, id).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
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
	cond, condArg := statusCond(from, store.TerminalQueueStatuses, 3)
	return changed(s.pool.Exec(ctx, `UPDATE dispatch_queue SET status = $1 WHERE id = $2 AND `+cond, to, id, condArg))
}

// ListQueue returns entries in the given statuses (all if empty), oldest
// first.
func (s *Store) ListQueue(ctx context.Context, statuses []string) ([]*store.QueueEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+queueCols+` FROM dispatch_queue
		WHERE cardinality($1::text[]) = 0 OR status = ANY($1::text[]) ORDER BY created_at, seq`, nonNil(statuses))
	return collect(rows, err, scanQueue)
}

// PinQueueEntry sets (or clears with "") the pinned agent of a pending
// entry; ErrNotFound when no such pending entry exists.
func (s *Store) PinQueueEntry(ctx context.Context, id, agentID string) error {
	return affected(s.pool.Exec(ctx, `UPDATE dispatch_queue SET pinned_agent_id = $1 WHERE id = $2 AND status = 'pending'`, agentID, id))
}

// ---------------------------------------------------------------- tokens

const agentTokenCols = `id, token_hash, token_prefix, agent_type, created_by, labels, expires_at, revoked_at, created_at`

func scanAgentToken(r scanner) (*store.AgentToken, error) {
	var t store.AgentToken
	var labels []byte
	if err := r.Scan(&t.ID, &t.TokenHash, &t.Prefix, &t.Kind, &t.BoundAgentID, &labels, &t.ExpiresAt, &t.RevokedAt,
		&t.CreatedAt); err != nil {
		return nil, mapErr(err)
	}
	if err := decodeJSON(labels, &t.Labels); err != nil {
		return nil, fmt.Errorf("postgres: agent token %s labels: %w", t.ID, err)
	}
	t.ExpiresAt = utc(t.ExpiresAt)
	t.RevokedAt = utc(t.RevokedAt)
	t.CreatedAt = t.CreatedAt.UTC()
	return &t, nil
}

// CreateAgentToken inserts an agent token (zero CreatedAt = now);
// ErrConflict on a duplicate id or hash.
func (s *Store) CreateAgentToken(ctx context.Context, t *store.AgentToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	labels, err := jsonArg(t.Labels, t.Labels == nil)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO agent_tokens (`+agentTokenCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
		t.ID, t.TokenHash, t.Prefix, t.Kind, t.BoundAgentID, labels, tsPtr(t.ExpiresAt), tsPtr(t.RevokedAt),
		ts(t.CreatedAt))
	return mapErr(err)
}

// GetAgentTokenByHash returns the token with that SHA-256 hex hash, or
// ErrNotFound.
func (s *Store) GetAgentTokenByHash(ctx context.Context, hash string) (*store.AgentToken, error) {
	return scanAgentToken(s.pool.QueryRow(ctx, `SELECT `+agentTokenCols+` FROM agent_tokens WHERE token_hash = $1`, hash))
}

// RevokeAgentToken sets revoked_at (the first revocation time is kept);
// ErrNotFound if the id is unknown.
func (s *Store) RevokeAgentToken(ctx context.Context, id string, at time.Time) error {
	return affected(s.pool.Exec(ctx, `UPDATE agent_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, ts(at), id))
}

// ListAgentTokens returns all agent tokens, newest first.
func (s *Store) ListAgentTokens(ctx context.Context) ([]*store.AgentToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentTokenCols+` FROM agent_tokens ORDER BY created_at DESC, id DESC`)
	return collect(rows, err, scanAgentToken)
}

const adminTokenCols = `id, label, role, token_hash, expires_at, revoked, created_at`

func scanAdminToken(r scanner) (*store.AdminToken, error) {
	var t store.AdminToken
	if err := r.Scan(&t.ID, &t.Label, &t.Role, &t.TokenHash, &t.ExpiresAt, &t.Revoked, &t.CreatedAt); err != nil {
		return nil, mapErr(err)
	}
	t.ExpiresAt = utc(t.ExpiresAt)
	t.CreatedAt = t.CreatedAt.UTC()
	return &t, nil
}

// CreateAdminToken inserts an admin token (zero CreatedAt = now);
// ErrConflict on a duplicate id or hash.
func (s *Store) CreateAdminToken(ctx context.Context, t *store.AdminToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO admin_tokens (`+adminTokenCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7)`,
		t.ID, t.Label, t.Role, t.TokenHash, tsPtr(t.ExpiresAt), t.Revoked, ts(t.CreatedAt))
	return mapErr(err)
}

// GetAdminTokenByHash returns the admin token with that hash, or
// ErrNotFound.
func (s *Store) GetAdminTokenByHash(ctx context.Context, hash string) (*store.AdminToken, error) {
	return scanAdminToken(s.pool.QueryRow(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens WHERE token_hash = $1`, hash))
}

// ListAdminTokens returns all admin tokens, newest first.
func (s *Store) ListAdminTokens(ctx context.Context) ([]*store.AdminToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens ORDER BY created_at DESC, id DESC`)
	return collect(rows, err, scanAdminToken)
}

// RevokeAdminToken marks a token revoked; ErrNotFound if unknown.
func (s *Store) RevokeAdminToken(ctx context.Context, id string) error {
	return affected(s.pool.Exec(ctx, `UPDATE admin_tokens SET revoked = true WHERE id = $1`, id))
}

// Column lists still used by this package's ingress code.
const (
	sourceCols   = `id, org_id, name, provider, routing_key, local_path, verification_method, webhook_secret, enabled, created_at`
	deliveryCols = `id, source_id, org_id, event, payload, status, error, decisions, received_at, processed_at`
)
