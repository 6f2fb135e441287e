package sqlstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

const runCols = `id, workflow_name, status, provider, repo_identifier, repo_url, ref, sha, delivery_id, source_id, org_id, triggered_by, failure_reason, timeout_ms, created_at, started_at, completed_at, duration_ms, trigger_type, target_branch, trust_tier, lock_file_source, workflow_origin`

func scanRun(r scanner) (*store.Run, error) {
	var run store.Run
	if err := r.Scan(&run.ID, &run.WorkflowName, &run.Status, &run.Provider, &run.RepoIdentifier, &run.RepoURL,
		&run.Ref, &run.SHA, &run.DeliveryID, &run.SourceID, &run.OrgID, &run.TriggeredBy, &run.FailureReason,
		&run.TimeoutMs, tcol(&run.CreatedAt), ntcol(&run.StartedAt), ntcol(&run.CompletedAt), ni64col(&run.DurationMs),
		&run.TriggerType, &run.TargetBranch, &run.TrustTier, &run.LockFileSource, &run.WorkflowOrigin); err != nil {
		return nil, mapErr(err)
	}
	return &run, nil
}

const jobCols = `id, run_id, job_name, base_job_name, matrix_values, status, agent_id, config, runs_on_labels, needs, error_message, pending_reason, timeout_ms, created_at, started_at, completed_at, duration_ms, last_heartbeat_at`

// jobSelectCols reads jobCols with the jsonb columns as text.
const jobSelectCols = `id, run_id, job_name, base_job_name, matrix_values::text, status, agent_id, config, runs_on_labels::text, needs::text, error_message, pending_reason, timeout_ms, created_at, started_at, completed_at, duration_ms, last_heartbeat_at`

func scanJob(r scanner) (*store.Job, error) {
	var j store.Job
	if err := r.Scan(&j.ID, &j.RunID, &j.JobName, &j.BaseJobName, jsonCol{&j.MatrixValues, "job matrix_values"}, &j.Status,
		&j.AgentID, rawCol{&j.Config}, jsonCol{&j.RunsOnLabels, "job runs_on_labels"}, jsonCol{&j.Needs, "job needs"},
		&j.ErrorMessage, &j.PendingReason, &j.TimeoutMs, tcol(&j.CreatedAt), ntcol(&j.StartedAt), ntcol(&j.CompletedAt),
		ni64col(&j.DurationMs), ntcol(&j.LastHeartbeatAt)); err != nil {
		return nil, mapErr(err)
	}
	return &j, nil
}

// CreateRun inserts a run with its jobs in one transaction; either all rows
// exist afterwards or none (ErrConflict on a duplicate run or job id).
// Defaults written back to the arguments: run status "pending", zero
// CreatedAt = now; job RunID = run.ID, status "pending", zero CreatedAt =
// the run's.
func (s *Store) CreateRun(ctx context.Context, run *store.Run, jobs []*store.Job) error {
	runDefaults(run, jobs)
	return mapErr(s.tx(ctx, func(tx conn) error { return insertRun(ctx, tx, run, jobs) }))
}

// runDefaults applies CreateRun's defaults to run and jobs.
func runDefaults(run *store.Run, jobs []*store.Job) {
	if run.Status == "" {
		run.Status = status.RunPending
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = now()
	}
	for _, j := range jobs {
		j.RunID = run.ID
		if j.Status == "" {
			j.Status = status.JobPending
		}
		if j.CreatedAt.IsZero() {
			j.CreatedAt = run.CreatedAt
		}
	}
}

// jobsPerInsert bounds the rows of one multi-row job insert: 19 parameters
// a row stays far below both engines' limits on bound parameters
// (PostgreSQL 65535, SQLite 32766).
const jobsPerInsert = 200

// insertRun writes the run row and its jobs (multi-row inserts of up to
// jobsPerInsert rows each) on q, normally a transaction; the defaults of
// CreateRun must already be applied.
func insertRun(ctx context.Context, q conn, run *store.Run, jobs []*store.Job) error {
	if _, err := q.exec(ctx, `INSERT INTO execution_runs (`+runCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		run.ID, run.WorkflowName, run.Status, run.Provider, run.RepoIdentifier, run.RepoURL, run.Ref, run.SHA,
		run.DeliveryID, run.SourceID, run.OrgID, run.TriggeredBy, run.FailureReason, run.TimeoutMs,
		q.d.ts(run.CreatedAt), q.d.tsPtr(run.StartedAt), q.d.tsPtr(run.CompletedAt), int64Arg(run.DurationMs),
		run.TriggerType, run.TargetBranch, run.TrustTier, run.LockFileSource, run.WorkflowOrigin); err != nil {
		return err
	}
	const rowPlaceholders = `(?,?,?,?,?,?::jsonb,?,?,?,?::jsonb,?::jsonb,?,?,?,?,?,?,?,?)`
	for first := 0; first < len(jobs); first += jobsPerInsert {
		chunk := jobs[first:min(first+jobsPerInsert, len(jobs))]
		var sql strings.Builder
		sql.WriteString(`INSERT INTO execution_jobs (seq, ` + jobCols + `) VALUES `)
		args := make([]any, 0, 19*len(chunk))
		for i, j := range chunk {
			if i > 0 {
				sql.WriteByte(',')
			}
			sql.WriteString(rowPlaceholders)
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
			args = append(args, first+i, j.ID, j.RunID, j.JobName, j.BaseJobName, matrix, j.Status, j.AgentID,
				rawArg(j.Config), labels, needs, j.ErrorMessage, j.PendingReason, j.TimeoutMs, q.d.ts(j.CreatedAt),
				q.d.tsPtr(j.StartedAt), q.d.tsPtr(j.CompletedAt), int64Arg(j.DurationMs), q.d.tsPtr(j.LastHeartbeatAt))
		}
		if _, err := q.exec(ctx, sql.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// GetRun returns a run by id, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	return scanRun(s.queryRow(ctx, runByIDQuery, id))
}

// ListRuns returns runs matching f, newest first (created_at desc, then id
// desc), and the total count of matches ignoring Limit/Offset. Limit <= 0
// means 20.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]*store.Run, int, error) {
	var c conds
	if len(f.Statuses) > 0 {
		cond, args := inList("status", status.Strings(f.Statuses), false)
		c.add(cond, args...)
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
		c.add("created_at > ?", s.d.ts(*f.Since))
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
		c.add("?::text IN (target_branch, CASE WHEN ref LIKE 'refs/heads/%' THEN substr(ref, 12) END)", f.Branch)
	}
	var total int
	if err := s.queryRow(ctx, `SELECT COUNT(*) FROM execution_runs`+c.where(), c.args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	page, args := c.page(store.PageLimit(f.Limit, 20, 0), max(f.Offset, 0))
	rows, err := s.query(ctx, `SELECT `+runCols+` FROM execution_runs`+c.where()+
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
func (s *Store) UpdateRunStatus(ctx context.Context, id string, from []status.Run, to status.Run, u store.RunUpdate) (bool, error) {
	q, args := s.runUpdate(id, from, to, u)
	return changed(s.exec(ctx, q, args...))
}

// MoveRun is UpdateRunStatus returning the changed row (nil, nil when no
// row changed), in one statement.
func (s *Store) MoveRun(ctx context.Context, id string, from []status.Run, to status.Run, u store.RunUpdate) (*store.Run, error) {
	q, args := s.runUpdate(id, from, to, u)
	return moved(scanRun(s.queryRow(ctx, q+` RETURNING `+runCols, args...)))
}

// moved is the answer of a conditional UPDATE … RETURNING: the row, or
// nil, nil when the condition matched none (ErrNotFound from the scan).
func moved[T any](row *T, err error) (*T, error) {
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return row, err
}

// runUpdate is the conditional UPDATE of UpdateRunStatus and MoveRun.
func (s *Store) runUpdate(id string, from []status.Run, to status.Run, u store.RunUpdate) (string, []any) {
	cond, condArgs := statusCond(from, store.TerminalRunStatuses)
	return `UPDATE execution_runs SET status = ?,
		failure_reason = CASE WHEN failure_reason = '' THEN COALESCE(?::text, '') ELSE failure_reason END,
		started_at = COALESCE(?, started_at),
		completed_at = COALESCE(?, completed_at),
		duration_ms = COALESCE(?, duration_ms)
		WHERE id = ? AND ` + cond,
		append([]any{string(to), strArg(u.FailureReason), s.d.tsPtr(u.StartedAt), s.d.tsPtr(u.CompletedAt),
			int64Arg(u.DurationMs), id}, condArgs...)
}

// GetJob returns a job by id, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id string) (*store.Job, error) {
	return scanJob(s.queryRow(ctx, `SELECT `+jobSelectCols+` FROM execution_jobs WHERE id = ?`, id))
}

// ListJobs returns a run's jobs in creation order (the order given to
// CreateRun).
func (s *Store) ListJobs(ctx context.Context, runID string) ([]*store.Job, error) {
	rows, err := s.query(ctx, jobsOfRunQuery, runID)
	return collect(rows, err, scanJob)
}

// ListJobsByStatus returns jobs in any of the statuses, oldest first.
func (s *Store) ListJobsByStatus(ctx context.Context, statuses []status.Job) ([]*store.Job, error) {
	cond, args := inList("status", status.Strings(statuses), false)
	rows, err := s.query(ctx, `SELECT `+jobSelectCols+` FROM execution_jobs
		WHERE `+cond+` ORDER BY created_at, run_id, seq`, args...)
	return collect(rows, err, scanJob)
}

// UpdateJobStatus moves a job to `to` only if its status is in `from` (nil
// from = any non-terminal status) and writes the non-nil fields of u.
// Reports whether a row changed.
func (s *Store) UpdateJobStatus(ctx context.Context, id string, from []status.Job, to status.Job, u store.JobUpdate) (bool, error) {
	q, args := s.jobUpdate(id, from, to, u)
	return changed(s.exec(ctx, q, args...))
}

// MoveJob is UpdateJobStatus returning the changed row (nil, nil when no
// row changed): one statement where the tracker used to update and then
// read the job back.
func (s *Store) MoveJob(ctx context.Context, id string, from []status.Job, to status.Job, u store.JobUpdate) (*store.Job, error) {
	q, args := s.jobUpdate(id, from, to, u)
	return moved(scanJob(s.queryRow(ctx, q+` RETURNING `+jobSelectCols, args...)))
}

// jobUpdate is the conditional UPDATE of UpdateJobStatus and MoveJob.
func (s *Store) jobUpdate(id string, from []status.Job, to status.Job, u store.JobUpdate) (string, []any) {
	cond, condArgs := statusCond(from, store.TerminalJobStatuses)
	return `UPDATE execution_jobs SET status = ?,
		agent_id = COALESCE(?::text, agent_id),
		error_message = COALESCE(?::text, error_message),
		pending_reason = COALESCE(?::text, pending_reason),
		started_at = COALESCE(?, started_at, ?),
		completed_at = COALESCE(?, completed_at),
		duration_ms = COALESCE(?, duration_ms),
		last_heartbeat_at = COALESCE(?, last_heartbeat_at)
		WHERE id = ? AND ` + cond,
		append([]any{string(to), strArg(u.AgentID), strArg(u.ErrorMessage), strArg(u.PendingReason), s.d.tsPtr(u.StartedAt),
			s.d.tsPtr(u.StartedAtIfUnset), s.d.tsPtr(u.CompletedAt), int64Arg(u.DurationMs), s.d.tsPtr(u.LastHeartbeatAt), id}, condArgs...)
}

// TouchJobHeartbeat sets last_heartbeat_at=at for a running (or
// cancelling) job; ErrNotFound when no such job is in those statuses.
func (s *Store) TouchJobHeartbeat(ctx context.Context, id string, at time.Time) error {
	return affected(s.exec(ctx, `UPDATE execution_jobs SET last_heartbeat_at = ? WHERE id = ? AND status IN ('running', 'cancelling')`,
		s.d.ts(at), id))
}
