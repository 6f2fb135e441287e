package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"kici.dev/kici/internal/store"
)

const stepCols = `job_id, step_index, run_id, step_name, status, exit_code, error_message, log_bytes, started_at, completed_at, duration_ms`

var (
	upsertStepOnce sync.Once
	upsertStepSQLs [2]string
)

// upsertStepSQL keeps a terminal status against a later non-terminal report
// ("stale"); other fields take the new non-empty value unless the report is
// stale, in which case they only fill empty ones. log_bytes only grows.
func (d *Dialect) upsertStepSQL() string {
	upsertStepOnce.Do(func() {
		for i, greatest := range []string{"MAX", "GREATEST"} {
			upsertStepSQLs[i] = buildUpsertStepSQL(greatest)
		}
	})
	if d.Postgres {
		return upsertStepSQLs[1]
	}
	return upsertStepSQLs[0]
}

func buildUpsertStepSQL(greatest string) string {
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
		"log_bytes = " + greatest + "(execution_steps.log_bytes, excluded.log_bytes)",
		pick("started_at", null),
		pick("completed_at", null),
		pick("duration_ms", null),
	}
	return `INSERT INTO execution_steps (` + stepCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (job_id, step_index) DO UPDATE SET ` + strings.Join(sets, ",\n")
}

// UpsertStep inserts or updates the step row keyed by (JobID, StepIndex). A
// terminal step status is never overwritten by a non-terminal one (the late
// report then only fills empty fields); otherwise non-empty fields of s
// replace stored ones. LogBytes only grows. ErrNotFound if the job does not
// exist.
func (s *Store) UpsertStep(ctx context.Context, st *store.Step) error {
	var exit any
	if st.ExitCode != nil {
		exit = int64(*st.ExitCode)
	}
	_, err := s.exec(ctx, s.d.upsertStepSQL(), st.JobID, st.StepIndex, st.RunID, st.StepName, st.Status, exit,
		st.ErrorMessage, st.LogBytes, s.d.tsPtr(st.StartedAt), s.d.tsPtr(st.CompletedAt), int64Arg(st.DurationMs))
	return mapErr(err)
}

func scanStep(r scanner) (*store.Step, error) {
	var st store.Step
	var exit sql.NullInt64
	if err := r.Scan(&st.JobID, &st.StepIndex, &st.RunID, &st.StepName, &st.Status, &exit, &st.ErrorMessage,
		&st.LogBytes, ntcol(&st.StartedAt), ntcol(&st.CompletedAt), ni64col(&st.DurationMs)); err != nil {
		return nil, mapErr(err)
	}
	if exit.Valid {
		c := int(exit.Int64)
		st.ExitCode = &c
	}
	return &st, nil
}

// ListSteps returns a job's steps by index.
func (s *Store) ListSteps(ctx context.Context, jobID string) ([]*store.Step, error) {
	rows, err := s.query(ctx, `SELECT `+stepCols+` FROM execution_steps WHERE job_id = ? ORDER BY step_index`, jobID)
	return collect(rows, err, scanStep)
}
