package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// On PostgreSQL every statement is a round trip to the server, and on a
// small host the server shares the CPUs with the orchestrator: what a
// write costs is mostly how many round trips it makes. A transaction whose
// statements need no result from one another (the runs a delivery
// creates, with the delivery's outcome) is sent as one pipeline — BEGIN
// and every statement in one batch (pgx's extended-protocol pipeline) —
// then COMMIT or ROLLBACK: two round trips instead of one per statement
// plus two.

// recorder is a queryer that keeps ExecContext statements (rebound to the
// dialect already) instead of running them, for a pipeline. The helpers
// it is handed to (insertRun, putRunContext) only execute statements;
// a read through it is a programming error.
type recorder struct{ stmts []recorded }

type recorded struct {
	sql  string
	args []any
}

// recordedResult stands for a statement not yet run.
type recordedResult struct{}

func (recordedResult) LastInsertId() (int64, error) {
	return 0, errors.New("sqlstore: a pipelined statement has no result yet")
}
func (recordedResult) RowsAffected() (int64, error) {
	return 0, errors.New("sqlstore: a pipelined statement has no result yet")
}

func (r *recorder) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	r.stmts = append(r.stmts, recorded{sql: q, args: args})
	return recordedResult{}, nil
}

func (r *recorder) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("sqlstore: a read inside a pipeline")
}

func (r *recorder) QueryRowContext(context.Context, string, ...any) *sql.Row {
	panic("sqlstore: a read inside a pipeline")
}

// errNoPipeline: the connection is not pgx's, so no pipeline can be sent
// (the caller runs the statements one by one instead).
var errNoPipeline = errors.New("sqlstore: no pipeline on this connection")

// onPgx runs fn on a pool connection's own pgx connection, for what
// database/sql cannot send (a pipeline); errNoPipeline when the database
// is not PostgreSQL through pgx. An error fn returns wrapping
// driver.ErrBadConn discards the connection.
func (s *Store) onPgx(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNoPipeline
		}
		return fn(sc.Conn())
	})
}

// pipelineTx runs stmts as one transaction in one batch, then commits
// when keep accepts the rows each statement changed (and every statement
// succeeded), else rolls back; it returns those counts, in order. A
// connection left in an unknown state (a failed ROLLBACK) is discarded.
// errNoPipeline when the database is not PostgreSQL through pgx.
func (s *Store) pipelineTx(ctx context.Context, stmts []recorded, keep func(affected []int64) bool) ([]int64, error) {
	var affected []int64
	err := s.onPgx(ctx, func(pc *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		for _, st := range stmts {
			b.Queue(st.sql, st.args...)
		}
		br := pc.SendBatch(ctx, b)
		_, runErr := br.Exec() // BEGIN
		for range stmts {
			if runErr != nil {
				break
			}
			var tag interface{ RowsAffected() int64 }
			tag, runErr = br.Exec()
			if runErr == nil {
				affected = append(affected, tag.RowsAffected())
			}
		}
		if err := br.Close(); runErr == nil {
			runErr = err
		}
		end := "COMMIT"
		if runErr != nil || !keep(affected) {
			end = "ROLLBACK"
		}
		if _, err := pc.Exec(context.WithoutCancel(ctx), end); err != nil {
			// The transaction may still be open on this connection: it
			// must not go back to the pool.
			return fmt.Errorf("%w: %s: %v (statements: %v)", driver.ErrBadConn, end, err, runErr)
		}
		if runErr != nil {
			return runErr
		}
		if end == "ROLLBACK" {
			return errPipelineRefused
		}
		return nil
	})
	if errors.Is(err, errPipelineRefused) {
		return affected, errPipelineRefused
	}
	return affected, err
}

// errPipelineRefused: keep refused the statements' outcome and they were
// rolled back (the caller explains why from the counts).
var errPipelineRefused = errors.New("sqlstore: pipeline rolled back")
