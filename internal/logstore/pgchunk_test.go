package logstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/protocol"
)

// By default chunks are written as plain JSON Lines, the form releases
// before compressed chunks read; with SetCompress(true) they are written
// compressed. Both read back line for line, also mixed in one step after
// chunks written by hand in the old form; a body in neither form is an
// error, not lines made up.
func TestPGChunkBodiesPlainByDefaultCompressedOnRequestBothRead(t *testing.T) {
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

	// Then 600 lines appended by default, and 2,000 with compression on.
	var fresh []protocol.LogLine
	for i := range 2600 {
		fresh = append(fresh, protocol.LogLine{Text: fmt.Sprintf("after the upgrade, line %d of a build's output", i), Stream: protocol.StreamStderr, Timestamp: int64(5000 + i)})
	}
	if res, err := p.AppendFrom("run-1", "job-1", 0, 3, fresh[:600]); err != nil || res.Stored != 600 {
		t.Fatalf("append: %+v, %v", res, err)
	}
	p.SetCompress(true)
	if res, err := p.AppendFrom("run-1", "job-1", 0, 603, fresh[600:]); err != nil || res.Stored != 2000 || res.Acked != 2603 {
		t.Fatalf("append: %+v, %v", res, err)
	}
	jsonBytes := func(ls []protocol.LogLine) (n int64) {
		for i := range ls {
			n += int64(len(appendLine(nil, &ls[i], -1)))
		}
		return n
	}
	form := func(from, to int) (stored int64, forms string) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT sum(octet_length(body)), string_agg(DISTINCT get_byte(body, 0)::text, ',')
			FROM step_log_chunks WHERE job_id = 'job-1' AND first_line >= $1 AND first_line < $2`, from, to).Scan(&stored, &forms); err != nil {
			t.Fatal(err)
		}
		return stored, forms
	}
	if _, forms := form(3, 603); forms != fmt.Sprint('{') {
		t.Errorf("chunks written by default: first bytes %q, want plain JSON Lines", forms)
	}
	if stored, forms := form(603, 2603); forms != fmt.Sprint(chunkS2) || stored*3 > jsonBytes(fresh[600:]) {
		t.Errorf("chunks written compressed: first bytes %q, %d bytes stored for %d of JSON Lines", forms, stored, jsonBytes(fresh[600:]))
	}
	var counted int64
	if err := db.QueryRow(ctx, `SELECT bytes FROM step_log_heads WHERE job_id = 'job-1'`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	if counted != jsonBytes(fresh) {
		t.Errorf("head counts %d bytes, want the JSON Lines' %d (the size cap is on output)", counted, jsonBytes(fresh))
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

// An append's chunks share one buffer: every chunk still holds exactly its
// own lines, cut at pgChunkLines lines or pgChunkBytes bytes, also when
// escaped text outgrows the buffer's estimate, plain or compressed.
func TestEncodedChunksHoldTheirOwnLines(t *testing.T) {
	var lines []protocol.LogLine
	for i := range 1200 {
		text := fmt.Sprintf("line %d", i)
		switch i % 7 {
		case 1:
			text = strings.Repeat(`"quoted\" \\ é ✓ `+"\x01\t", 20) // escapes: longer than estimated
		case 2:
			text = ""
		}
		if i == 900 || i == 901 {
			text = strings.Repeat("x", pgChunkBytes-100) // cuts a chunk by size
		}
		lines = append(lines, protocol.LogLine{Timestamp: int64(i), Stream: protocol.StreamStdout, Text: text})
	}
	for _, compress := range []bool{false, true} {
		b := encodeChunks(40, lines, compress)
		next, total := 0, int64(0)
		var text int64
		for i := range b.firsts {
			if b.firsts[i] != int64(40+next) {
				t.Fatalf("compress=%v: chunk %d starts at line %d, want %d", compress, i, b.firsts[i], 40+next)
			}
			body := b.bodies[b.starts[i] : b.starts[i]+b.lens[i]]
			if (body[0] == chunkS2) != compress {
				t.Fatalf("compress=%v: chunk %d has first byte %#x", compress, i, body[0])
			}
			got, err := unpackChunk(body)
			if err != nil {
				t.Fatalf("compress=%v: chunk %d: %v", compress, i, err)
			}
			n := int(b.counts[i])
			if n > pgChunkLines || len(got) != n {
				t.Fatalf("compress=%v: chunk %d counts %d lines and holds %d", compress, i, n, len(got))
			}
			var size int
			for j := range got {
				want := lines[next+j]
				if got[j] != want {
					t.Fatalf("compress=%v: chunk %d line %d = %q, want %q", compress, i, j, got[j].Text, want.Text)
				}
				size += len(appendLine(nil, &want, -1))
				text += int64(len(want.Text))
			}
			if i < len(b.firsts)-1 && n < pgChunkLines && size < pgChunkBytes {
				t.Fatalf("compress=%v: chunk %d cut at %d lines and %d bytes, under both bounds", compress, i, n, size)
			}
			total += int64(size)
			next += n
		}
		if next != len(lines) || len(b.firsts) < 4 {
			t.Fatalf("compress=%v: %d chunks hold %d of %d lines (want at least 4 chunks: 500 lines, bytes, 500, rest)", compress, len(b.firsts), next, len(lines))
		}
		if b.plain != total || b.text != text {
			t.Errorf("compress=%v: plain %d text %d, want %d and %d", compress, b.plain, b.text, total, text)
		}
	}
}
