package logstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/protocol"
)

// Chunks are stored compressed and read back line for line; chunks stored
// as plain JSON Lines (before compression) are read as they are, also
// when a step holds both forms; a body in neither form is an error, not
// lines made up.
func TestPGChunkBodiesCompressedAndOldOnesStillRead(t *testing.T) {
	url := migratedDatabase(t)
	p := openPG(t, url)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(ctx) })

	// Two chunks written before compression: lines 0-1 and 2.
	var old []protocol.LogLine
	for i := range 3 {
		old = append(old, protocol.LogLine{Text: fmt.Sprintf("before the upgrade %d", i), Stream: protocol.StreamStdout, Timestamp: int64(1000 + i)})
	}
	for _, c := range []struct{ first, n int }{{0, 2}, {2, 1}} {
		var body []byte
		for i := c.first; i < c.first+c.n; i++ {
			body = appendLine(body, &old[i], -1)
		}
		if _, err := db.Exec(ctx, `INSERT INTO step_log_chunks (job_id, step_index, first_line, line_count, run_id, body)
			VALUES ('job-1', 0, $1, $2, 'run-1', $3)`, c.first, c.n, body); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO step_log_heads (job_id, step_index, run_id, lines, agent_offset, updated_at)
		VALUES ('job-1', 0, 'run-1', 3, 3, now())`); err != nil {
		t.Fatal(err)
	}

	// Then 2,000 lines appended now.
	var fresh []protocol.LogLine
	for i := range 2000 {
		fresh = append(fresh, protocol.LogLine{Text: fmt.Sprintf("after the upgrade, line %d of a build's output", i), Stream: protocol.StreamStderr, Timestamp: int64(5000 + i)})
	}
	res, err := p.AppendFrom("run-1", "job-1", 0, 3, fresh)
	if err != nil || res.Stored != 2000 || res.Acked != 2003 {
		t.Fatalf("append: %+v, %v", res, err)
	}
	var plainBytes int64
	for i := range fresh {
		plainBytes += int64(len(appendLine(nil, &fresh[i], -1)))
	}
	var stored, counted int64
	var forms string
	if err := db.QueryRow(ctx, `SELECT sum(octet_length(body)), string_agg(DISTINCT get_byte(body, 0)::text, ',')
		FROM step_log_chunks WHERE job_id = 'job-1' AND first_line >= 3`).Scan(&stored, &forms); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT bytes FROM step_log_heads WHERE job_id = 'job-1'`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	if forms != fmt.Sprint(chunkS2) || stored*3 > plainBytes {
		t.Errorf("new chunks: first bytes %q, %d bytes stored for %d of JSON Lines; want compressed", forms, stored, plainBytes)
	}
	if counted != plainBytes {
		t.Errorf("head counts %d bytes, want the JSON Lines' %d (the size cap is on output)", counted, plainBytes)
	}

	want := append(append([]protocol.LogLine(nil), old...), fresh...)
	var got []protocol.LogLine
	for cursor := 0; ; {
		page, next, err := p.Read("run-1", "job-1", 0, cursor, 700)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got, cursor = append(got, page...), next
	}
	if len(got) != len(want) {
		t.Fatalf("read %d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	if _, err := db.Exec(ctx, `UPDATE step_log_chunks SET body = '\x07ff00'::bytea WHERE job_id = 'job-1' AND first_line = 0`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Read("run-1", "job-1", 0, 0, 10); err == nil || !strings.Contains(err.Error(), "chunk 0") {
		t.Errorf("a body in neither form read as %v", err)
	}
}
