package logstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/blobstore/blobtest"
	"kici.dev/kici/internal/protocol"
)

// A million-line step log is archived to the S3 server and read back with
// every line: the count, the first, middle and last lines, every page in
// order, and a search over the whole log. It logs the archive throughput
// and the latency of one page read from the archive (docs/logs.md).
func TestArchiveMillionLinesFromS3(t *testing.T) {
	const n = 1_000_000
	live := NewFS(t.TempDir())
	blobs := blobtest.S3(t, 0)
	a, err := NewArchived(live, blobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := func(i int) string {
		return fmt.Sprintf("build output line %07d: compiling package %d of the project", i, i%977)
	}
	batch := make([]protocol.LogLine, 0, 5000)
	for off := 0; off < n; off += cap(batch) {
		batch = batch[:0]
		for i := off; i < off+cap(batch); i++ {
			batch = append(batch, protocol.LogLine{Timestamp: int64(i), Stream: protocol.StreamStdout, Text: text(i)})
		}
		if _, err := a.AppendFrom(archRun, jobID, 0, int64(off), batch); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	ok, err := a.ArchiveStep(context.Background(), StepRef{archRun, jobID, 0})
	took := time.Since(start)
	if err != nil || !ok {
		t.Fatalf("ArchiveStep = %v, %v", ok, err)
	}
	st := a.ArchiveStats()
	data, _ := archiveKeys(archRun, jobID, 0)
	x, err := a.index(context.Background(), StepRef{archRun, jobID, 0}, mustMarker(t, live))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("archived %d lines (%.1f MiB of JSON Lines) to %s in %v: %.0f lines/s, %.1f MiB/s; %d chunks, %.1f MiB compressed",
		st.Lines, float64(st.Bytes)/(1<<20), data, took.Round(time.Millisecond), float64(st.Lines)/took.Seconds(),
		float64(st.Bytes)/(1<<20)/took.Seconds(), len(x.First), float64(x.DataSize)/(1<<20))
	if c, _ := a.Lines(archRun, jobID, 0); c != n {
		t.Fatalf("Lines = %d", c)
	}
	if c := countLive(t, live, 0); c != 0 {
		t.Fatalf("%d live lines remain", c)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		start := time.Now()
		page, next, err := a.Read(archRun, jobID, 0, i, 1000)
		lat := time.Since(start)
		if err != nil || len(page) == 0 || page[0].Text != text(i) || page[0].Timestamp != int64(i) || next != min(i+1000, n) {
			t.Fatalf("page at %d: %d lines, next %d, err %v", i, len(page), next, err)
		}
		t.Logf("page of %d lines at line %d read from the archive in %v", len(page), i, lat.Round(time.Microsecond))
	}
	start = time.Now()
	seen := 0
	for cursor := 0; ; {
		page, next, err := a.Read(archRun, jobID, 0, cursor, MaxReadLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for j, l := range page {
			if l.Text != text(cursor+j) {
				t.Fatalf("line %d = %q", cursor+j, l.Text)
			}
		}
		seen += len(page)
		cursor = next
	}
	if seen != n {
		t.Fatalf("paged through %d lines, want %d", seen, n)
	}
	t.Logf("paged through all %d lines in %v", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	var hits []int
	if err := a.Scan(archRun, jobID, 0, 0, func(i int, l protocol.LogLine) bool {
		if strings.Contains(l.Text, "compiling package 976 ") {
			hits = append(hits, i)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(hits) != n/977 || hits[0] != 976 || hits[len(hits)-1] != 976+977*(n/977-1) {
		t.Fatalf("search found %d lines", len(hits))
	}
	t.Logf("searched all %d lines in %v", n, time.Since(start).Round(time.Millisecond))
}

func mustMarker(t *testing.T, live *FS) *archiveMarker {
	t.Helper()
	m, err := live.archived(archRun, jobID, 0)
	if err != nil || m == nil {
		t.Fatalf("marker: %v %v", m, err)
	}
	return m
}
