package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"
)

// plainChunksBatch is how many chunks PlainChunks rewrites per
// transaction, and plainChunksBytes how many plain bytes it holds at most
// (beyond one chunk) before it writes them: a batch of full chunks would
// otherwise hold 500 × 256 KiB.
const plainChunksBatch = 500

var plainChunksBytes = 32 << 20 // a variable so that a test can cut batches by size

// PlainChunks rewrites every step_log_chunks body stored compressed
// (chunkS2) as the plain JSON Lines it holds, the only form releases
// before compressed chunks read. It works through the table once in key
// order, at most plainChunksBatch chunks per transaction, and returns how many it
// rewrote; progress, when not nil, is called after each batch with the
// count so far. Line numbers, counts and heads do not change. A run that
// stopped half-way is finished by running it again: plain bodies are left
// as they are. It is the work `kici-orchestrator migrate down-to` does
// before rolling the schema back below sqlstore.NodeLogFormsMigration
// (docs/upgrade.md). db is a PostgreSQL database; no node may be writing
// to it. Errors name the chunk that could not be read.
func PlainChunks(ctx context.Context, db *sql.DB, progress func(rewritten int)) (int, error) {
	after, total := chunkKey{first: -1}, 0
	for {
		n, last, err := plainChunkBatch(ctx, db, after.job, after.step, after.first)
		if err != nil {
			return total, err
		}
		total += n
		if n == 0 {
			return total, nil
		}
		after = last
		if progress != nil {
			progress(total)
		}
	}
}

// chunkKey is a step_log_chunks row's primary key.
type chunkKey struct {
	job   string
	step  int
	first int64
}

// plainChunkBatch rewrites up to plainChunksBatch compressed chunks after
// the key (job, step, first) in one transaction and returns how many and
// the last one's key.
func plainChunkBatch(ctx context.Context, db *sql.DB, job string, step int, first int64) (int, chunkKey, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, chunkKey{}, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	rows, err := tx.QueryContext(ctx, `SELECT job_id, step_index, first_line, body FROM step_log_chunks
		WHERE (job_id, step_index, first_line) > ($1, $2, $3) AND substring(body FROM 1 FOR 1) = decode('00', 'hex')
		ORDER BY job_id, step_index, first_line LIMIT $4 FOR UPDATE`, job, step, first, plainChunksBatch)
	if err != nil {
		return 0, chunkKey{}, fmt.Errorf("logstore: read compressed chunks: %w", err)
	}
	type plainChunk struct {
		key  chunkKey
		body []byte
	}
	var todo []plainChunk
	held := 0
	for held < plainChunksBytes && rows.Next() {
		var c plainChunk
		var body []byte
		if err := rows.Scan(&c.key.job, &c.key.step, &c.key.first, &body); err != nil {
			rows.Close()
			return 0, chunkKey{}, fmt.Errorf("logstore: read compressed chunks: %w", err)
		}
		if c.body, err = plainBody(body); err != nil {
			rows.Close()
			return 0, chunkKey{}, fmt.Errorf("logstore: job %s step %d chunk %d: %w", c.key.job, c.key.step, c.key.first, err)
		}
		todo = append(todo, c)
		held += len(c.body)
	}
	rows.Close() // left early past plainChunksBytes: the rest waits for the next batch
	if err := rows.Err(); err != nil {
		return 0, chunkKey{}, fmt.Errorf("logstore: read compressed chunks: %w", err)
	}
	for _, c := range todo {
		if _, err := tx.ExecContext(ctx, `UPDATE step_log_chunks SET body = $4 WHERE job_id = $1 AND step_index = $2 AND first_line = $3`,
			c.key.job, c.key.step, c.key.first, c.body); err != nil {
			return 0, chunkKey{}, fmt.Errorf("logstore: rewrite job %s step %d chunk %d: %w", c.key.job, c.key.step, c.key.first, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, chunkKey{}, fmt.Errorf("logstore: rewrite compressed chunks: %w", err)
	}
	if len(todo) == 0 {
		return 0, chunkKey{}, nil
	}
	return len(todo), todo[len(todo)-1].key, nil
}

// errPlainForm is a compressed body whose content is not JSON Lines.
var errPlainForm = errors.New("logstore: a compressed chunk does not hold JSON Lines")

// plainBody is the JSON Lines a compressed body (chunkS2) holds.
func plainBody(body []byte) ([]byte, error) {
	if len(body) == 0 || body[0] != chunkS2 {
		return nil, errChunkForm
	}
	plain, err := s2.Decode(nil, body[1:])
	if err != nil {
		return nil, err
	}
	if len(plain) == 0 || plain[0] != '{' {
		return nil, errPlainForm
	}
	return plain, nil
}
