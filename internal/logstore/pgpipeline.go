package logstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// An append is a transaction whose first statement (the step's head row,
// locked) decides the rest. Sent one statement at a time it was six round
// trips to the server (BEGIN, the head, the chunks, the head's update, the
// wake-up, COMMIT), and a million-line step was some four thousand
// appends; pipelined it is two: BEGIN with the head, then the rest with
// COMMIT (pgx batches: one network exchange each).

// queued is one statement of a pipelined batch.
type queued struct {
	sql  string
	args []any
}

// pipelinedTx runs BEGIN and first (scanned by scan) in one round trip,
// then the statements rest returns from what scan read, with COMMIT, in a
// second. An error from scan, rest or any statement rolls the transaction
// back and is returned; a connection that cannot roll back is closed, so
// no transaction stays open on a pooled connection.
func pipelinedTx(ctx context.Context, pool *pgxpool.Pool, first string, firstArgs []any, scan func(pgx.Row) error, rest func() ([]queued, error)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	c := conn.Conn()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(first, firstArgs...)
	br := c.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		err = scan(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback(c)
		return err
	}
	stmts, err := rest()
	if err != nil {
		rollback(c)
		return err
	}
	b = &pgx.Batch{}
	for _, st := range stmts {
		b.Queue(st.sql, st.args...)
	}
	b.Queue("COMMIT")
	br = c.SendBatch(ctx, b)
	for range len(stmts) + 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback(c)
	}
	return err
}

// rollback ends c's transaction, or closes c when it cannot (the pool
// then drops it).
func rollback(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Close(ctx)
	}
}
