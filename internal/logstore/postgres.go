package logstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"kici.dev/kici/internal/pglisten"
	"kici.dev/kici/internal/pgpool"
	"kici.dev/kici/internal/protocol"
)

// PG stores step logs in PostgreSQL, shared by every orchestrator on the
// database: the default when KICI_DATABASE_URL is set. Its tables
// (step_log_heads, step_log_chunks) come from the store's migration 00016.
//
// An append is one transaction: it locks the step's head row (so appends to
// one step are serialised across nodes), skips the lines below the agent
// offset the head holds (a replay is a no-op), inserts the new lines as
// chunks of at most pgChunkLines lines keyed by (job, step, first line),
// moves the head and sends NOTIFY kici_step_logs with "<jobId>:<step>". A
// crash rolls the whole append back, so the head and the chunks always
// agree. Reads take the chunks overlapping the page from the primary key
// range, so a page costs the same wherever it lies. Wait wakes on appends
// through any node: each PG LISTENs on kici_step_logs on one connection of
// its own.
type PG struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	appended wakeups // readers waiting for a step's next append, by "<jobId>:<step>"

	maxBytes atomic.Int64 // per-step cap on agent output; 0: none
	compress atomic.Bool  // write chunk bodies compressed (pgchunk.go)

	cancel context.CancelFunc
	done   chan struct{}

	linesStored, bytesStored, linesDuplicate, linesDropped, linesCapped atomic.Int64
	notified                                                            atomic.Int64 // notifications received
}

var _ Store = (*PG)(nil)

// pgNotifyChannel is the LISTEN/NOTIFY channel of appended step logs.
const pgNotifyChannel = "kici_step_logs"

// pgChunkLines and pgChunkBytes bound one stored chunk, so a page read
// decodes at most a few chunks beyond the page itself.
const (
	pgChunkLines = 500
	pgChunkBytes = 256 << 10
)

// pgTimeout bounds one database call of the backend.
const pgTimeout = 30 * time.Second

// pgRecheck is how often a waiting follower looks at the log even without a
// notification (a notification lost while the listener reconnects).
const pgRecheck = 2 * time.Second

// OpenPG connects to the PostgreSQL database at url (whose schema the
// store's migrations created) and starts listening for appends. Close
// releases it. Errors: an unparsable URL or an unreachable database.
func OpenPG(ctx context.Context, url string, logger *slog.Logger) (*PG, error) {
	pool, err := pgpool.OpenAtMost(ctx, url, 8) // appends to one step are serialised anyway
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lctx, cancel := context.WithCancel(context.Background())
	p := &PG{pool: pool, log: logger, cancel: cancel, done: make(chan struct{})}
	p.maxBytes.Store(DefaultStepLogMaxBytes)
	go p.listen(lctx)
	return p, nil
}

// Close stops listening and closes the connections.
func (p *PG) Close() {
	p.cancel()
	<-p.done
	p.pool.Close()
}

// SetStepMaxBytes sets the per-step size cap on agent output (see
// FS.SetStepMaxBytes).
func (p *PG) SetStepMaxBytes(n int64) { p.maxBytes.Store(max(n, 0)) }

// SetCompress makes later appends write each chunk's body compressed
// (KICI_STEP_LOG_COMPRESS; pgchunk.go) or, with false, as plain JSON
// Lines, the form releases before compressed chunks read. Both forms are
// always read.
func (p *PG) SetCompress(on bool) { p.compress.Store(on) }

// Stats implements Store.
func (p *PG) Stats() Stats {
	return Stats{LinesStored: p.linesStored.Load(), BytesStored: p.bytesStored.Load(),
		LinesDuplicate: p.linesDuplicate.Load(), LinesDropped: p.linesDropped.Load(),
		LinesCapped: p.linesCapped.Load()}
}

// Append implements Store.
func (p *PG) Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return err
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := p.append(runID, jobID, stepIndex, -1, lines)
	return err
}

// AppendFrom implements Store: lines below the agent offset in the step's
// head row are skipped, the rest stored, in one transaction.
func (p *PG) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (AppendResult, error) {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return AppendResult{}, err
	}
	if err := checkOffset(offset, len(lines)); err != nil {
		return AppendResult{}, err
	}
	return p.append(runID, jobID, stepIndex, offset, lines)
}

func (p *PG) append(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (AppendResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	var res AppendResult
	var text int64
	// The upsert locks the head row until the transaction ends.
	var stored, held, size int64
	var capped, archived bool
	err := pipelinedTx(ctx, p.pool, `INSERT INTO step_log_heads (job_id, step_index, run_id, updated_at) VALUES ($1, $2, $3, now())
			ON CONFLICT (job_id, step_index) DO UPDATE SET run_id = step_log_heads.run_id
			RETURNING lines, agent_offset, bytes, capped, archive IS NOT NULL`, []any{jobID, stepIndex, runID},
		func(r pgx.Row) error { return r.Scan(&stored, &held, &size, &capped, &archived) },
		func() ([]queued, error) {
			if archived {
				return nil, ErrArchived
			}
			todo := lines
			if offset >= 0 {
				from := offset
				if skip := held - offset; skip > 0 {
					skip = min(skip, int64(len(todo)))
					res.Duplicate = int(skip)
					todo = todo[skip:]
					from += skip
				}
				if from > held {
					res.Missing = from - held
				}
				res.Acked = held
				if len(todo) > 0 {
					res.Acked = from + int64(len(todo))
				}
			}
			var marker bool
			if offset >= 0 {
				end := res.Acked
				todo, res.Capped, marker = applyCap(p.maxBytes.Load(), size, capped, todo)
				if marker {
					todo = append(todo[:len(todo):len(todo)], capMarker(p.maxBytes.Load()))
				}
				if len(todo) == 0 && res.Capped > 0 {
					return []queued{{`UPDATE step_log_heads SET agent_offset = $3, updated_at = now()
						WHERE job_id = $1 AND step_index = $2`, []any{jobID, stepIndex, end}}}, nil
				}
			}
			if len(todo) == 0 {
				return nil, nil
			}
			batch := encodeChunks(stored, todo, p.compress.Load())
			text = batch.text
			newHeld := held
			if offset >= 0 {
				newHeld = res.Acked
			}
			res.Stored = len(todo)
			return []queued{
				{`INSERT INTO step_log_chunks (job_id, step_index, first_line, line_count, run_id, body)
					SELECT $1, $2, f, c, $3, substring($6::bytea FROM s + 1 FOR l)
					FROM unnest($4::bigint[], $5::int[], $7::int[], $8::int[]) AS t(f, c, s, l)`,
					[]any{jobID, stepIndex, runID, batch.firsts, batch.counts, batch.bodies, batch.starts, batch.lens}},
				{`UPDATE step_log_heads SET lines = lines + $3, agent_offset = $4, updated_at = now(),
					bytes = bytes + $5, capped = capped OR $6
					WHERE job_id = $1 AND step_index = $2`, []any{jobID, stepIndex, len(todo), newHeld, batch.plain, marker}},
				{`SELECT pg_notify($1, $2)`, []any{pgNotifyChannel, waitKey(jobID, stepIndex)}},
			}, nil
		})
	if err != nil {
		return AppendResult{}, fmt.Errorf("logstore: append: %w", err)
	}
	p.linesCapped.Add(int64(res.Capped))
	p.linesStored.Add(int64(res.Stored))
	p.bytesStored.Add(text)
	p.linesDuplicate.Add(int64(res.Duplicate))
	p.linesDropped.Add(res.Missing)
	if res.Stored > 0 {
		p.appended.wake(waitKey(jobID, stepIndex))
	}
	return res, nil
}

// chunkBatch is one append's chunks: each chunk's first line and line
// count, and the stored bodies laid end to end in one buffer (body i is
// bodies[starts[i] : starts[i]+lens[i]]). One buffer travels as one bytea
// parameter, which the statement cuts with substring: encoding a bytea[]
// of the same bodies cost the client about twice their size in garbage.
type chunkBatch struct {
	firsts []int64
	counts []int32
	// starts and lens fit int32: an append holds at most one batch of
	// the dispatcher's (4 MiB of text) and one frame (25 MiB), and
	// escaping at most sextuples text.
	starts, lens []int32
	bodies       []byte
	// text is the lines' text bytes, plain their JSON Lines bytes (what
	// the head counts, compressed or not).
	text, plain int64
}

// encodeChunks cuts lines numbered from first into chunks (pgChunkLines,
// pgChunkBytes) of JSON Lines, compressed when compress is set
// (appendPackedChunk). The plain bodies are written into one buffer sized from
// the lines up front.
func encodeChunks(first int64, lines []protocol.LogLine, compress bool) chunkBatch {
	est := 0
	for i := range lines {
		est += len(lines[i].Text) + len(lines[i].Stream) + encodedLineOverhead
	}
	b := chunkBatch{bodies: make([]byte, 0, est)}
	start, bodyStart := 0, 0
	for i := range lines {
		b.bodies = appendLine(b.bodies, &lines[i], -1)
		b.text += int64(len(lines[i].Text))
		if i-start+1 == pgChunkLines || len(b.bodies)-bodyStart >= pgChunkBytes || i == len(lines)-1 {
			b.firsts = append(b.firsts, first+int64(start))
			b.counts = append(b.counts, int32(i-start+1))
			b.starts = append(b.starts, int32(bodyStart))
			b.lens = append(b.lens, int32(len(b.bodies)-bodyStart))
			start, bodyStart = i+1, len(b.bodies)
		}
	}
	b.plain = int64(len(b.bodies))
	if compress {
		plain := b.bodies
		b.bodies = make([]byte, 0, len(plain)/2)
		for i := range b.starts {
			from := len(b.bodies)
			b.bodies = appendPackedChunk(b.bodies, plain[b.starts[i]:b.starts[i]+b.lens[i]])
			b.starts[i], b.lens[i] = int32(from), int32(len(b.bodies)-from)
		}
	}
	return b
}

// encodedLineOverhead is what appendLine adds to a line's text and stream
// without escapes: {"ts":13 digits,"stream":"…","msg":"…"} and a newline.
const encodedLineOverhead = len(`{"ts":1764638400000,"stream":"","msg":""}`) + 1

// Read implements Store (see FS.Read for the contract).
func (p *PG) Read(runID, jobID string, stepIndex int, cursor, limit int) ([]protocol.LogLine, int, error) {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return nil, cursor, err
	}
	if cursor < 0 {
		return nil, cursor, fmt.Errorf("logstore: negative cursor %d", cursor)
	}
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	// A chunk holds at most pgChunkLines lines, so the chunks overlapping
	// [cursor, cursor+limit) start in (cursor-pgChunkLines, cursor+limit).
	rows, err := p.pool.Query(ctx, `SELECT first_line, body FROM step_log_chunks
		WHERE job_id = $1 AND step_index = $2 AND first_line > $3 AND first_line < $4 AND run_id = $5
		ORDER BY first_line`, jobID, stepIndex, int64(cursor)-pgChunkLines, int64(cursor)+int64(limit), runID)
	if err != nil {
		return nil, cursor, fmt.Errorf("logstore: read: %w", err)
	}
	defer rows.Close()
	out := make([]protocol.LogLine, 0, min(limit, 1024))
	for rows.Next() {
		var first int64
		var body []byte
		if err := rows.Scan(&first, &body); err != nil {
			return nil, cursor, fmt.Errorf("logstore: read: %w", err)
		}
		if first != int64(cursor+len(out)) && first > int64(cursor) {
			break // a hole cannot happen (heads and chunks move together); stop at it
		}
		lines, err := unpackChunk(body)
		if err != nil {
			return nil, cursor, fmt.Errorf("logstore: job %s step %d chunk %d: %w", jobID, stepIndex, first, err)
		}
		if skip := int64(cursor) - first; skip > 0 {
			lines = lines[min(skip, int64(len(lines))):]
		}
		out = append(out, lines[:min(len(lines), limit-len(out))]...)
	}
	if err := rows.Err(); err != nil {
		return nil, cursor, fmt.Errorf("logstore: read: %w", err)
	}
	return out, cursor + len(out), nil
}

// Lines returns the number of lines a step's log holds (0 when it has
// none).
func (p *PG) Lines(runID, jobID string, stepIndex int) (int, error) {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	var n int64
	err := p.pool.QueryRow(ctx, `SELECT lines FROM step_log_heads WHERE job_id = $1 AND step_index = $2 AND run_id = $3`,
		jobID, stepIndex, runID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("logstore: %w", err)
	}
	return int(n), nil
}

// Wait implements Store: it wakes on appends through any node (NOTIFY),
// and looks again every pgRecheck in case a notification was lost.
func (p *PG) Wait(ctx context.Context, runID, jobID string, stepIndex int, cursor int) error {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return err
	}
	return p.appended.waitForLines(ctx, waitKey(jobID, stepIndex),
		func() (int, error) { return p.Lines(runID, jobID, stepIndex) }, cursor, pgRecheck)
}

// Scan implements Store, reading the log page by page.
func (p *PG) Scan(runID, jobID string, stepIndex, from int, fn func(n int, l protocol.LogLine) bool) error {
	return scanPages(p, runID, jobID, stepIndex, from, fn)
}

func waitKey(jobID string, stepIndex int) string { return jobID + ":" + strconv.Itoa(stepIndex) }

// listen keeps a LISTEN on pgNotifyChannel and wakes the waiters of each
// notified step; whenever the LISTEN is (again) in effect it wakes every
// waiter (they look again: a notification may have been missed).
func (p *PG) listen(ctx context.Context) {
	defer close(p.done)
	pglisten.Run(ctx, p.pool, pgNotifyChannel, p.log, p.appended.wakeAll, func(payload string) {
		p.notified.Add(1)
		if strings.IndexByte(payload, ':') > 0 {
			p.appended.wake(payload)
		}
	})
}
