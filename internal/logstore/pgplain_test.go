package logstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx" driver

	"kici.dev/kici/internal/protocol"
)

// PlainChunks, the rollback's rewrite, leaves no compressed chunk behind,
// several batches of them, and every step reads the same lines with
// the same heads afterwards; plain chunks, also in a step that has both,
// are left alone, and a second run finds nothing to do. A compressed
// chunk that cannot be read stops it with the chunk's name, unchanged.
func TestPlainChunksLeavesOnlyChunksOlderReleasesRead(t *testing.T) {
	url := migratedDatabase(t)
	p := openPG(t, url)
	ctx := context.Background()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	lines := func(job string, from, n int) []protocol.LogLine {
		out := make([]protocol.LogLine, n)
		for i := range out {
			out[i] = protocol.LogLine{Timestamp: int64(from + i), Stream: protocol.StreamStdout, Text: fmt.Sprintf("%s line %d", job, from+i)}
		}
		return out
	}
	appendAll := func(job string, from, n int) {
		t.Helper()
		for at := from; at < from+n; at += 50_000 {
			k := min(50_000, from+n-at)
			if res, err := p.AppendFrom("run-1", job, 0, int64(at), lines(job, at, k)); err != nil || res.Stored != k {
				t.Fatalf("append %s at %d: %+v, %v", job, at, res, err)
			}
		}
	}
	appendAll("job-mixed", 0, 1_000) // plain
	p.SetCompress(true)
	appendAll("job-mixed", 1_000, 1_000)
	appendAll("job-big", 0, 260_000) // 520 compressed chunks

	readAll := func(job string) []protocol.LogLine {
		t.Helper()
		var got []protocol.LogLine
		for cursor := 0; ; {
			page, next, err := p.Read("run-1", job, 0, cursor, MaxReadLimit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				return got
			}
			got, cursor = append(got, page...), next
		}
	}
	forms := func() (plain, compressed int) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE get_byte(body, 0) = 123), count(*) FILTER (WHERE get_byte(body, 0) = 0)
			FROM step_log_chunks`).Scan(&plain, &compressed); err != nil {
			t.Fatal(err)
		}
		return plain, compressed
	}
	heads := func() string {
		t.Helper()
		var s string
		if err := db.QueryRowContext(ctx, `SELECT string_agg(job_id || ':' || lines || ':' || bytes || ':' || agent_offset, ',' ORDER BY job_id) FROM step_log_heads`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	plainBefore, compressedBefore := forms()
	if plainBefore != 2 || compressedBefore != 522 {
		t.Fatalf("before: %d plain and %d compressed chunks, want 2 and 522", plainBefore, compressedBefore)
	}
	headsBefore := heads()

	// Batches cut by size (about 130 chunks of 30 KB here) rather than by
	// count: a batch that stops early must not skip the chunks it left.
	defer func(was int) { plainChunksBytes = was }(plainChunksBytes)
	plainChunksBytes = 4 << 20
	var reports []int
	n, err := PlainChunks(ctx, db, func(done int) { reports = append(reports, done) })
	if err != nil {
		t.Fatal(err)
	}
	if n != compressedBefore || len(reports) < 4 || reports[len(reports)-1] != n {
		t.Fatalf("rewrote %d chunks with progress %v, want %d in batches cut by size", n, reports, compressedBefore)
	}
	if plain, compressed := forms(); plain != 524 || compressed != 0 {
		t.Fatalf("after: %d plain and %d compressed chunks, want 524 and 0", plain, compressed)
	}
	if h := heads(); h != headsBefore {
		t.Fatalf("heads changed: %s, were %s", h, headsBefore)
	}
	for job, want := range map[string][]protocol.LogLine{
		"job-mixed": append(lines("job-mixed", 0, 1_000), lines("job-mixed", 1_000, 1_000)...),
		"job-big":   lines("job-big", 0, 260_000),
	} {
		got := readAll(job)
		if len(got) != len(want) {
			t.Fatalf("%s: read %d lines, want %d", job, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s line %d = %+v, want %+v", job, i, got[i], want[i])
			}
		}
	}
	if n, err := PlainChunks(ctx, db, nil); err != nil || n != 0 {
		t.Fatalf("second run: %d rewritten, %v; want nothing to do", n, err)
	}

	appendAll("job-late", 0, 10)
	if _, err := db.ExecContext(ctx, `UPDATE step_log_chunks SET body = '\x00ff00ff'::bytea WHERE job_id = 'job-late'`); err != nil {
		t.Fatal(err)
	}
	if _, err := PlainChunks(ctx, db, nil); err == nil || !strings.Contains(err.Error(), "job job-late step 0 chunk 0") {
		t.Fatalf("an unreadable compressed chunk: %v, want an error naming it", err)
	}
	if _, compressed := forms(); compressed != 1 {
		t.Fatalf("the unreadable chunk was changed: %d compressed chunks left, want 1", compressed)
	}
}
