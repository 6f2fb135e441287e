// Package sqlite is the embedded default implementation of store.Store, on
// modernc.org/sqlite (pure Go, no cgo).
//
// The database runs in WAL mode with a busy timeout and foreign keys on, and
// every transaction begins IMMEDIATE so writers serialise on the database
// lock instead of failing on a lock upgrade; plain reads stay concurrent.
// Times are stored as INTEGER Unix milliseconds (UTC), so they round-trip
// exactly to the millisecond. JSON values (labels, needs, matrix values) are
// TEXT columns where NULL stands for a Go nil and "[]"/"{}" for an empty
// list or map. Schema migrations (goose, embedded) are applied by Open.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlstore"
)

//go:embed migrations/sqlite/*.sql
var migrationsFS embed.FS

// BusyTimeout is how long a connection waits for the database write lock
// before failing with SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Store is the SQLite store.Store. It is safe for concurrent use.
type Store struct {
	*sqlstore.Store
	db *sql.DB
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it and its parent directories when missing) the
// SQLite database at path, configures WAL, busy timeout, foreign keys and
// immediate transactions, and applies the embedded migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create directory: %w", err)
	}
	// Create the file 0600 before SQLite does: it holds token hashes and
	// webhook secrets, and SQLite gives the -wal and -shm files the database
	// file's permissions.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w (is the directory writable?)", abs, err)
	} else {
		f.Close()
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	// Writers serialise on the database lock (IMMEDIATE transactions wait up
	// to BusyTimeout); a few connections let reads proceed concurrently.
	n := runtime.NumCPU()
	if n < 4 {
		n = 4
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	m, err := Migrations(db)
	if err == nil {
		err = m.Up(ctx)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{Store: sqlstore.New(db, sqlstore.SQLite(), nil), db: db}, nil
}

// Migrations returns the embedded SQLite migrations bound to db.
func Migrations(db *sql.DB) (*sqlstore.Migrations, error) {
	fsys, err := fs.Sub(migrationsFS, "migrations/sqlite")
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	return sqlstore.NewMigrations(db, sqlstore.SQLite(), fsys)
}

// ---------------------------------------------------------------- helpers

type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

// mapErr turns driver errors into store.ErrConflict / store.ErrNotFound.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %v", store.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%w: %v", store.ErrNotFound, err)
		}
	}
	return err
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func ms(t time.Time) int64 { return t.UnixMilli() }

func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

func fromMs(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMilli(v.Int64).UTC()
	return &t
}

func int64Ptr(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	n := v.Int64
	return &n
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

// jsonArg encodes v as JSON text, or NULL when isNil.
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

func rawFrom(v sql.NullString) json.RawMessage {
	if !v.Valid || v.String == "" {
		return nil
	}
	return json.RawMessage(v.String)
}

func decodeJSON(v sql.NullString, dst any) error {
	if !v.Valid {
		return nil
	}
	return json.Unmarshal([]byte(v.String), dst)
}

// listArg encodes a string list as a JSON array (never NULL), for json_each.
func listArg(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(l)
	return string(b)
}

// statusCond is a condition on column `status` for a transition: status in
// from, or (nil from) status not terminal. arg is the ?N index to use.
func statusCond(from []string, terminal []string, arg int) (string, any) {
	if from == nil {
		return fmt.Sprintf("status NOT IN (SELECT value FROM json_each(?%d))", arg), listArg(terminal)
	}
	return fmt.Sprintf("status IN (SELECT value FROM json_each(?%d))", arg), listArg(from)
}

func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func collect[T any](rows *sql.Rows, scan func(scanner) (*T, error)) ([]*T, error) {
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

func affected(res sql.Result, err error) error {
	if err != nil {
		return mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ---------------------------------------------------------------- runs

const runCols = `id, workflow_name, status, provider, repo_identifier, repo_url, ref, sha, delivery_id, source_id, org_id, triggered_by, failure_reason, timeout_ms, created_at, started_at, completed_at, duration_ms, trigger_type, target_branch, trust_tier, lock_file_source`

func scanRun(r scanner) (*store.Run, error) {
	var run store.Run
	var created int64
	var started, completed, dur sql.NullInt64
	if err := r.Scan(&run.ID, &run.WorkflowName, &run.Status, &run.Provider, &run.RepoIdentifier, &run.RepoURL,
		&run.Ref, &run.SHA, &run.DeliveryID, &run.SourceID, &run.OrgID, &run.TriggeredBy, &run.FailureReason,
		&run.TimeoutMs, &created, &started, &completed, &dur, &run.TriggerType, &run.TargetBranch, &run.TrustTier,
		&run.LockFileSource); err != nil {
		return nil, mapErr(err)
	}
	run.CreatedAt = time.UnixMilli(created).UTC()
	run.StartedAt = fromMs(started)
	run.CompletedAt = fromMs(completed)
	run.DurationMs = int64Ptr(dur)
	return &run, nil
}

const jobCols = `id, run_id, job_name, base_job_name, matrix_values, status, agent_id, config, runs_on_labels, needs, error_message, pending_reason, timeout_ms, created_at, started_at, completed_at, duration_ms, last_heartbeat_at`

func scanJob(r scanner) (*store.Job, error) {
	var j store.Job
	var matrix, config, labels, needs sql.NullString
	var created int64
	var started, completed, dur, hb sql.NullInt64
	if err := r.Scan(&j.ID, &j.RunID, &j.JobName, &j.BaseJobName, &matrix, &j.Status, &j.AgentID, &config,
		&labels, &needs, &j.ErrorMessage, &j.PendingReason, &j.TimeoutMs, &created, &started, &completed,
		&dur, &hb); err != nil {
		return nil, mapErr(err)
	}
	if err := decodeJSON(matrix, &j.MatrixValues); err != nil {
		return nil, fmt.Errorf("sqlite: job %s matrix_values: %w", j.ID, err)
	}
	if err := decodeJSON(labels, &j.RunsOnLabels); err != nil {
		return nil, fmt.Errorf("sqlite: job %s runs_on_labels: %w", j.ID, err)
	}
	if err := decodeJSON(needs, &j.Needs); err != nil {
		return nil, fmt.Errorf("sqlite: job %s needs: %w", j.ID, err)
	}
	j.Config = rawFrom(config)
	j.CreatedAt = time.UnixMilli(created).UTC()
	j.StartedAt = fromMs(started)
	j.CompletedAt = fromMs(completed)
	j.DurationMs = int64Ptr(dur)
	j.LastHeartbeatAt = fromMs(hb)
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
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO execution_runs (`+runCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			run.ID, run.WorkflowName, run.Status, run.Provider, run.RepoIdentifier, run.RepoURL, run.Ref, run.SHA,
			run.DeliveryID, run.SourceID, run.OrgID, run.TriggeredBy, run.FailureReason, run.TimeoutMs,
			ms(run.CreatedAt), msPtr(run.StartedAt), msPtr(run.CompletedAt), int64Arg(run.DurationMs),
			run.TriggerType, run.TargetBranch, run.TrustTier, run.LockFileSource); err != nil {
			return err
		}
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
			if _, err := tx.ExecContext(ctx, `INSERT INTO execution_jobs (seq, `+jobCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
				i, j.ID, j.RunID, j.JobName, j.BaseJobName, matrix, j.Status, j.AgentID, rawArg(j.Config), labels,
				needs, j.ErrorMessage, j.PendingReason, j.TimeoutMs, ms(j.CreatedAt), msPtr(j.StartedAt),
				msPtr(j.CompletedAt), int64Arg(j.DurationMs), msPtr(j.LastHeartbeatAt)); err != nil {
				return err
			}
		}
		return nil
	})
	return mapErr(err)
}

// GetRun returns a run by id, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	return scanRun(s.db.QueryRowContext(ctx, `SELECT `+runCols+` FROM execution_runs WHERE id = ?`, id))
}

// ListRuns returns runs matching f, newest first (created_at desc, then id
// desc), and the total count of matches ignoring Limit/Offset. Limit <= 0
// means 20.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]*store.Run, int, error) {
	var c conds
	if len(f.Statuses) > 0 {
		c.add("status IN (SELECT value FROM json_each(?))", listArg(f.Statuses))
	}
	if f.WorkflowName != "" {
		c.add("workflow_name = ?", f.WorkflowName)
	}
	if f.Repo != "" {
		c.add("repo_identifier = ?", f.Repo)
	}
	if f.DeliveryID != "" {
		c.add("delivery_id = ?", f.DeliveryID)
	}
	if f.Since != nil {
		c.add("created_at > ?", ms(*f.Since))
	}
	if f.RoutingKey != "" {
		c.add("source_id IN (SELECT id FROM sources WHERE routing_key = ?)", f.RoutingKey)
	}
	if f.SourceID != "" {
		c.add("source_id = ?", f.SourceID)
	}
	if f.TriggerType != "" {
		c.add("trigger_type = ?", f.TriggerType)
	}
	if f.Branch != "" {
		c.add("? IN (target_branch, CASE WHEN ref LIKE 'refs/heads/%' THEN substr(ref, 12) END)", f.Branch)
	}
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM execution_runs`+c.where(), c.args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	page, args := c.page(store.PageLimit(f.Limit, 20, 0), max(f.Offset, 0))
	rows, err := s.db.QueryContext(ctx, `SELECT `+runCols+` FROM execution_runs`+c.where()+
		` ORDER BY created_at DESC, id DESC`+page, args...)
	if err != nil {
		return nil, 0, err
	}
	runs, err := collect(rows, scanRun)
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
	res, err := s.db.ExecContext(ctx, `UPDATE execution_runs SET status = ?1,
		failure_reason = CASE WHEN failure_reason = '' THEN COALESCE(?2, '') ELSE failure_reason END,
		started_at = COALESCE(?3, started_at),
		completed_at = COALESCE(?4, completed_at),
		duration_ms = COALESCE(?5, duration_ms)
		WHERE id = ?6 AND `+cond,
		to, strArg(u.FailureReason), msPtr(u.StartedAt), msPtr(u.CompletedAt), int64Arg(u.DurationMs), id, condArg)
	return changed(res, err)
}

func changed(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// ---------------------------------------------------------------- jobs

// GetJob returns a job by id, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id string) (*store.Job, error) {
	return scanJob(s.db.QueryRowContext(ctx, `SELECT `+jobCols+` FROM execution_jobs WHERE id = ?`, id))
}

// ListJobs returns a run's jobs in creation order (the order given to
// CreateRun).
func (s *Store) ListJobs(ctx context.Context, runID string) ([]*store.Job, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobCols+` FROM execution_jobs WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanJob)
}

// ListJobsByStatus returns jobs in any of the statuses, oldest first.
func (s *Store) ListJobsByStatus(ctx context.Context, statuses []string) ([]*store.Job, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobCols+` FROM execution_jobs
		WHERE status IN (SELECT value FROM json_each(?)) ORDER BY created_at, run_id, seq`, listArg(statuses))
	if err != nil {
		return nil, err
	}
	return collect(rows, scanJob)
}

// UpdateJobStatus moves a job to `to` only if its status is in `from` (nil
// from = any non-terminal status) and writes the non-nil fields of u.
// Reports whether a row changed.
func (s *Store) UpdateJobStatus(ctx context.Context, id string, from []string, to string, u store.JobUpdate) (bool, error) {
	cond, condArg := statusCond(from, store.TerminalJobStatuses, 10)
	res, err := s.db.ExecContext(ctx, `UPDATE execution_jobs SET status = ?1,
		agent_id = COALESCE(?2, agent_id),
		error_message = COALESCE(?3, error_message),
		pending_reason = COALESCE(?4, pending_reason),
		started_at = COALESCE(?5, started_at),
		completed_at = COALESCE(?6, completed_at),
		duration_ms = COALESCE(?7, duration_ms),
		last_heartbeat_at = COALESCE(?8, last_heartbeat_at)
		WHERE id = ?9 AND `+cond,
		to, strArg(u.AgentID), strArg(u.ErrorMessage), strArg(u.PendingReason), msPtr(u.StartedAt),
		msPtr(u.CompletedAt), int64Arg(u.DurationMs), msPtr(u.LastHeartbeatAt), id, condArg)
	return changed(res, err)
}

// TouchJobHeartbeat sets last_heartbeat_at=at for a running (or
// cancelling) job; ErrNotFound when no such job is in those statuses.
func (s *Store) TouchJobHeartbeat(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE execution_jobs SET last_heartbeat_at = ? WHERE id = ? AND status IN ('running', 'cancelling')`,
		ms(at), id)
	return affected(res, err)
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
		"log_bytes = MAX(execution_steps.log_bytes, excluded.log_bytes)",
		pick("started_at", null),
		pick("completed_at", null),
		pick("duration_ms", null),
	}
	return `INSERT INTO execution_steps (` + stepCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?)
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
		exit = *st.ExitCode
	}
	_, err := s.db.ExecContext(ctx, upsertStepSQL, st.JobID, st.StepIndex, st.RunID, st.StepName, st.Status, exit,
		st.ErrorMessage, st.LogBytes, msPtr(st.StartedAt), msPtr(st.CompletedAt), int64Arg(st.DurationMs))
	return mapErr(err)
}

func scanStep(r scanner) (*store.Step, error) {
	var st store.Step
	var exit, started, completed, dur sql.NullInt64
	if err := r.Scan(&st.JobID, &st.StepIndex, &st.RunID, &st.StepName, &st.Status, &exit, &st.ErrorMessage,
		&st.LogBytes, &started, &completed, &dur); err != nil {
		return nil, mapErr(err)
	}
	if exit.Valid {
		c := int(exit.Int64)
		st.ExitCode = &c
	}
	st.StartedAt = fromMs(started)
	st.CompletedAt = fromMs(completed)
	st.DurationMs = int64Ptr(dur)
	return &st, nil
}

// ListSteps returns a job's steps by index.
func (s *Store) ListSteps(ctx context.Context, jobID string) ([]*store.Step, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+stepCols+` FROM execution_steps WHERE job_id = ? ORDER BY step_index`, jobID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanStep)
}

// ---------------------------------------------------------------- queue

const queueCols = `id, run_id, job_name, runs_on_labels, exclude_labels, status, agent_id, dispatch_attempts, ack_deadline, pinned_agent_id, created_at`

func scanQueue(r scanner) (*store.QueueEntry, error) {
	var e store.QueueEntry
	var labels, exclude sql.NullString
	var ack sql.NullInt64
	var created int64
	if err := r.Scan(&e.ID, &e.RunID, &e.JobName, &labels, &exclude, &e.Status, &e.AgentID, &e.Attempts, &ack,
		&e.PinnedAgentID, &created); err != nil {
		return nil, mapErr(err)
	}
	if err := decodeJSON(labels, &e.RunsOnLabels); err != nil {
		return nil, fmt.Errorf("sqlite: queue %s runs_on_labels: %w", e.ID, err)
	}
	if err := decodeJSON(exclude, &e.ExcludeLabels); err != nil {
		return nil, fmt.Errorf("sqlite: queue %s exclude_labels: %w", e.ID, err)
	}
	e.AckDeadline = fromMs(ack)
	e.CreatedAt = time.UnixMilli(created).UTC()
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
	_, err = s.db.ExecContext(ctx, `INSERT INTO dispatch_queue (seq, `+queueCols+`)
		VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM dispatch_queue), ?,?,?,?,?,?,?,?,?,?,?)`,
		e.ID, e.RunID, e.JobName, labels, exclude, e.Status, e.AgentID, e.Attempts, msPtr(e.AckDeadline),
		e.PinnedAgentID, ms(e.CreatedAt))
	return mapErr(err)
}

// ClaimNext atomically claims the oldest pending entry an agent with labels
// may take (RunsOnLabels ⊆ labels, no ExcludeLabels in labels, PinnedAgentID
// empty or agentID), marks it dispatched to agentID with ackDeadline and
// returns it; (nil, nil) when nothing fits.
func (s *Store) ClaimNext(ctx context.Context, agentID string, labels []string, ackDeadline time.Time) (*store.QueueEntry, error) {
	var e *store.QueueEntry
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		e, err = claimed(tx.QueryRowContext(ctx, `UPDATE dispatch_queue
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
			RETURNING `+queueCols, agentID, listArg(labels), ms(ackDeadline)))
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ClaimByID claims one specific pending entry for agentID (pins and labels
// are the caller's business); (nil, nil) if it is no longer pending.
func (s *Store) ClaimByID(ctx context.Context, id, agentID string, ackDeadline time.Time) (*store.QueueEntry, error) {
	return claimed(s.db.QueryRowContext(ctx, `UPDATE dispatch_queue
		SET status = 'dispatched', agent_id = ?, ack_deadline = ?
		WHERE id = ? AND status = 'pending' RETURNING `+queueCols, agentID, ms(ackDeadline), id))
}

// AckQueueEntry clears the ack deadline of an entry dispatched to agentID;
// ErrNotFound when no such dispatched entry exists.
func (s *Store) AckQueueEntry(ctx context.Context, id, agentID string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE dispatch_queue SET ack_deadline = NULL
		WHERE id = ? AND agent_id = ? AND status = 'dispatched'`, id, agentID)
	return affected(res, err)
}

// RequeueEntry moves a dispatched entry back to pending (clearing agent and
// ack deadline) and increments Attempts; reports the new attempt count, or
// ok=false if the entry is not dispatched.
func (s *Store) RequeueEntry(ctx context.Context, id string) (int, bool, error) {
	var attempts int
	err := s.db.QueryRowContext(ctx, `UPDATE dispatch_queue
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
	cond, condArg := statusCond(from, store.TerminalQueueStatuses, 3)
	res, err := s.db.ExecContext(ctx, `UPDATE dispatch_queue SET status = ?1 WHERE id = ?2 AND `+cond, to, id, condArg)
	return changed(res, err)
}

// ListQueue returns entries in the given statuses (all if empty), oldest
// first.
func (s *Store) ListQueue(ctx context.Context, statuses []string) ([]*store.QueueEntry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+queueCols+` FROM dispatch_queue
		WHERE ?1 = '[]' OR status IN (SELECT value FROM json_each(?1)) ORDER BY created_at, seq`, listArg(statuses))
	if err != nil {
		return nil, err
	}
	return collect(rows, scanQueue)
}

// PinQueueEntry sets (or clears with "") the pinned agent of a pending
// entry; ErrNotFound when no such pending entry exists.
func (s *Store) PinQueueEntry(ctx context.Context, id, agentID string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE dispatch_queue SET pinned_agent_id = ? WHERE id = ? AND status = 'pending'`, agentID, id)
	return affected(res, err)
}

// ---------------------------------------------------------------- tokens

const agentTokenCols = `id, token_hash, token_prefix, agent_type, created_by, labels, expires_at, revoked_at, created_at`

func scanAgentToken(r scanner) (*store.AgentToken, error) {
	var t store.AgentToken
	var labels sql.NullString
	var expires, revoked sql.NullInt64
	var created int64
	if err := r.Scan(&t.ID, &t.TokenHash, &t.Prefix, &t.Kind, &t.BoundAgentID, &labels, &expires, &revoked,
		&created); err != nil {
		return nil, mapErr(err)
	}
	if err := decodeJSON(labels, &t.Labels); err != nil {
		return nil, fmt.Errorf("sqlite: agent token %s labels: %w", t.ID, err)
	}
	t.ExpiresAt = fromMs(expires)
	t.RevokedAt = fromMs(revoked)
	t.CreatedAt = time.UnixMilli(created).UTC()
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
	_, err = s.db.ExecContext(ctx, `INSERT INTO agent_tokens (`+agentTokenCols+`) VALUES (?,?,?,?,?,?,?,?,?)`,
		t.ID, t.TokenHash, t.Prefix, t.Kind, t.BoundAgentID, labels, msPtr(t.ExpiresAt), msPtr(t.RevokedAt),
		ms(t.CreatedAt))
	return mapErr(err)
}

// GetAgentTokenByHash returns the token with that SHA-256 hex hash, or
// ErrNotFound.
func (s *Store) GetAgentTokenByHash(ctx context.Context, hash string) (*store.AgentToken, error) {
	return scanAgentToken(s.db.QueryRowContext(ctx, `SELECT `+agentTokenCols+` FROM agent_tokens WHERE token_hash = ?`, hash))
}

// RevokeAgentToken sets revoked_at (the first revocation time is kept);
// ErrNotFound if the id is unknown.
func (s *Store) RevokeAgentToken(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE agent_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, ms(at), id)
	return affected(res, err)
}

// ListAgentTokens returns all agent tokens, newest first.
func (s *Store) ListAgentTokens(ctx context.Context) ([]*store.AgentToken, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+agentTokenCols+` FROM agent_tokens ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAgentToken)
}

const adminTokenCols = `id, label, role, token_hash, expires_at, revoked, created_at`

func scanAdminToken(r scanner) (*store.AdminToken, error) {
	var t store.AdminToken
	var expires sql.NullInt64
	var created int64
	if err := r.Scan(&t.ID, &t.Label, &t.Role, &t.TokenHash, &expires, &t.Revoked, &created); err != nil {
		return nil, mapErr(err)
	}
	t.ExpiresAt = fromMs(expires)
	t.CreatedAt = time.UnixMilli(created).UTC()
	return &t, nil
}

// CreateAdminToken inserts an admin token (zero CreatedAt = now);
// ErrConflict on a duplicate id or hash.
func (s *Store) CreateAdminToken(ctx context.Context, t *store.AdminToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO admin_tokens (`+adminTokenCols+`) VALUES (?,?,?,?,?,?,?)`,
		t.ID, t.Label, t.Role, t.TokenHash, msPtr(t.ExpiresAt), t.Revoked, ms(t.CreatedAt))
	return mapErr(err)
}

// GetAdminTokenByHash returns the admin token with that hash, or
// ErrNotFound.
func (s *Store) GetAdminTokenByHash(ctx context.Context, hash string) (*store.AdminToken, error) {
	return scanAdminToken(s.db.QueryRowContext(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens WHERE token_hash = ?`, hash))
}

// ListAdminTokens returns all admin tokens, newest first.
func (s *Store) ListAdminTokens(ctx context.Context) ([]*store.AdminToken, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAdminToken)
}

// RevokeAdminToken marks a token revoked; ErrNotFound if unknown.
func (s *Store) RevokeAdminToken(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE admin_tokens SET revoked = 1 WHERE id = ?`, id)
	return affected(res, err)
}

// Column lists still used by this package's ingress code.
const (
	sourceCols   = `id, org_id, name, provider, routing_key, local_path, verification_method, webhook_secret, enabled, created_at`
	deliveryCols = `id, source_id, org_id, event, payload, status, error, decisions, received_at, processed_at`
)
