package logstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forEachBackend runs fn against each backend: files in a temporary
// directory and a throwaway PostgreSQL database migrated by the store.
// open returns a new instance over the same storage each call (a second
// node, or the same node after a restart).
func forEachBackend(t *testing.T, fn func(t *testing.T, open func() Store)) {
	t.Run("files", func(t *testing.T) {
		root := t.TempDir()
		fn(t, func() Store { return NewFS(root) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := migratedDatabase(t)
		fn(t, func() Store { return openPG(t, url) })
	})
}

func migratedDatabase(t *testing.T) string {
	t.Helper()
	url := pgtest.URL(t)
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return url
}

func openPG(t *testing.T, url string) *PG {
	t.Helper()
	p, err := OpenPG(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Replays, overlapping chunks and chunks sent again after a restart of the
// store (or through another node) are stored once; untagged lines of other
// writers do not shift the agent's numbering; a gap is stored and counted.
func TestConformanceAppendFromStoresEachLineOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() Store) {
		s := open()
		must := func(s Store, off int64, from, n int, wantStored int, wantAcked int64) {
			t.Helper()
			res, err := s.AppendFrom(runID, jobID, JobStepIndex, off, lines(from, n))
			if err != nil {
				t.Fatal(err)
			}
			if res.Stored != wantStored || res.Acked != wantAcked {
				t.Fatalf("AppendFrom(%d, %d lines) = %+v, want stored %d acked %d", off, n, res, wantStored, wantAcked)
			}
		}
		if err := s.Append(runID, jobID, JobStepIndex, []protocol.LogLine{{Text: "provisioning"}}); err != nil {
			t.Fatal(err)
		}
		must(s, 0, 0, 5, 5, 5)
		must(s, 0, 0, 5, 0, 5) // replay
		must(s, 3, 3, 4, 2, 7) // overlap
		if err := s.Append(runID, jobID, JobStepIndex, []protocol.LogLine{{Text: "scaler says"}}); err != nil {
			t.Fatal(err)
		}
		s2 := open() // a restart, or another node
		res, err := s2.AppendFrom(runID, jobID, JobStepIndex, 5, lines(5, 4))
		if err != nil || res.Stored != 2 || res.Duplicate != 2 || res.Acked != 9 {
			t.Fatalf("through a new instance: %+v %v", res, err)
		}
		got := strings.Join(texts(t, s2, JobStepIndex), "|")
		if got != "provisioning|"+want(7)+"|scaler says|line 7|line 8" {
			t.Fatalf("log = %s", got)
		}
		if st := s.Stats(); st.LinesDropped != 0 || st.LinesDuplicate != 7 {
			t.Fatalf("stats %+v", st)
		}
		res, err = s2.AppendFrom(runID, jobID, JobStepIndex, 12, lines(12, 1))
		if err != nil || res.Missing != 3 || res.Acked != 13 || s2.Stats().LinesDropped != 3 {
			t.Fatalf("gap: %+v %v %+v", res, err, s2.Stats())
		}
	})
}

// The same chunk appended at once through two instances (two nodes an
// agent reached one after the other) is stored once.
func TestConformanceConcurrentReplaysStoreOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() Store) {
		a := open()
		b := a
		if _, isPG := a.(*PG); isPG {
			b = open()
		}
		var wg sync.WaitGroup
		for round := 0; round < 20; round++ {
			for _, s := range []Store{a, b} {
				wg.Add(1)
				go func(s Store, off int) {
					defer wg.Done()
					if _, err := s.AppendFrom(runID, jobID, 2, int64(off), lines(off, 50)); err != nil {
						t.Error(err)
					}
				}(s, round*50)
			}
			wg.Wait()
		}
		if got, w := strings.Join(texts(t, a, 2), "|"), want(1000); got != w {
			t.Fatalf("log has %d lines, want each of 1000 once", strings.Count(got, "|")+1)
		}
	})
}

// Pages read by offset return exactly the lines asked for, wherever they
// lie and whatever the batches were; a missing log reads empty; bad ids
// and cursors are refused.
func TestConformanceReadByOffset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() Store) {
		s := open()
		n := 0
		for _, size := range []int{1, 499, 500, 501, 1200, 3, 796} {
			if _, err := s.AppendFrom(runID, jobID, 0, int64(n), lines(n, size)); err != nil {
				t.Fatal(err)
			}
			n += size
		}
		for _, c := range []struct{ cursor, limit, want int }{
			{0, 1, 1}, {0, 1000, 1000}, {499, 7, 7}, {999, 1000, 1000}, {3499, 10, 1}, {3500, 10, 0}, {2000, 20000, 1500},
		} {
			page, next, err := s.Read(runID, jobID, 0, c.cursor, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) != c.want || next != c.cursor+c.want {
				t.Fatalf("Read(%d, %d) = %d lines, next %d; want %d", c.cursor, c.limit, len(page), next, c.want)
			}
			for i, l := range page {
				if w := fmt.Sprintf("line %d", c.cursor+i); l.Text != w || l.Stream != protocol.StreamStdout || l.Timestamp != int64(1000+c.cursor+i) {
					t.Fatalf("Read(%d, %d)[%d] = %+v, want %s", c.cursor, c.limit, i, l, w)
				}
			}
		}
		var scanned []string
		if err := s.Scan(runID, jobID, 0, 3490, func(n int, l protocol.LogLine) bool {
			scanned = append(scanned, fmt.Sprintf("%d=%s", n, l.Text))
			return n < 3495
		}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(scanned, ","); got != "3490=line 3490,3491=line 3491,3492=line 3492,3493=line 3493,3494=line 3494,3495=line 3495" {
			t.Fatalf("scan = %s", got)
		}
		if page, next, err := s.Read(runID, jobID, 5, 0, 10); err != nil || len(page) != 0 || next != 0 {
			t.Fatalf("missing log: %v %d %v", page, next, err)
		}
		if _, _, err := s.Read(runID, "../x", 0, 0, 10); !errors.Is(err, ErrInvalidPath) {
			t.Fatalf("bad job id: %v", err)
		}
		if _, _, err := s.Read(runID, jobID, 0, -1, 10); err == nil {
			t.Fatal("negative cursor accepted")
		}
		if err := s.Append(runID, jobID, BuildStepIndex-1, lines(0, 1)); !errors.Is(err, ErrInvalidPath) {
			t.Fatalf("bad step index: %v", err)
		}
		// Text that needs escaping comes back as it went in.
		odd := []protocol.LogLine{{Timestamp: 1, Text: "quote \" backslash \\ tab \t ünïcode <b>&"}}
		if err := s.Append(runID, jobID, 3, odd); err != nil {
			t.Fatal(err)
		}
		if page, _, err := s.Read(runID, jobID, 3, 0, 10); err != nil || len(page) != 1 || page[0] != odd[0] {
			t.Fatalf("odd text: %+v %v", page, err)
		}
	})
}

// Wait returns once a line beyond the cursor is stored, and at once when it
// already is.
func TestConformanceWaitWakesOnAppend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() Store) {
		s := open()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := s.Wait(ctx, runID, jobID, 1, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait on an empty log: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Wait(context.Background(), runID, jobID, 1, 0) }()
		if err := s.Append(runID, jobID, 1, lines(0, 1)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(context.Background(), runID, jobID, 1, 0); err != nil {
			t.Fatal(err)
		}
	})
}

// A follower on one node is woken by an append through another node: the
// waiting instance receives the NOTIFY of the other's append (counted), it
// does not only find the line at its periodic recheck.
func TestPGWaitWakesOnAppendThroughAnotherNode(t *testing.T) {
	url := migratedDatabase(t)
	a, b := openPG(t, url), openPG(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Wait(ctx, runID, jobID, 0, 0) }()
	waitForWaiter(t, a, waitKey(jobID, 0))
	if err := b.Append(runID, jobID, 0, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a.notified.Load() == 0 {
		t.Fatal("the waiting node received no notification of the other node's append")
	}
}

func waitForWaiter(t *testing.T, p *PG, key string) {
	t.Helper()
	wait.For(t, 5*time.Second, "Wait to register", func() bool {
		p.appended.mu.Lock()
		defer p.appended.mu.Unlock()
		return p.appended.m[key] != nil
	})
}

// Retention: RemoveRun clears one run; SweepOlderThan clears the runs not
// written since the cutoff and leaves the others.
func TestConformanceRetention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() Store) {
		s := open()
		// Job ids are unique across runs.
		const other, otherJob = "1b6c0f5e-2a43-4c43-9b0e-5f1a2b3c4d5e", "2b6c0f5e-2a43-4c43-9b0e-5f1a2b3c4d5e"
		for r, j := range map[string]string{runID: jobID, other: otherJob} {
			if err := s.Append(r, j, 0, lines(0, 3)); err != nil {
				t.Fatal(err)
			}
		}
		if swept, err := s.SweepOlderThan(time.Now().Add(-time.Hour), 10); err != nil || len(swept) != 0 {
			t.Fatalf("sweep of fresh logs: %v %v", swept, err)
		}
		if err := s.RemoveRun(runID); err != nil {
			t.Fatal(err)
		}
		if got := texts(t, s, 0); len(got) != 0 {
			t.Fatalf("removed run still reads %v", got)
		}
		if got, _, _ := s.Read(other, otherJob, 0, 0, 10); len(got) != 3 {
			t.Fatalf("the other run lost its log: %v", got)
		}
		swept, err := s.SweepOlderThan(time.Now().Add(time.Hour), 10)
		if err != nil || len(swept) != 1 || swept[0] != other {
			t.Fatalf("sweep = %v %v, want [%s]", swept, err, other)
		}
		if got, _, _ := s.Read(other, otherJob, 0, 0, 10); len(got) != 0 {
			t.Fatalf("swept run still reads %v", got)
		}
		if res, err := s.AppendFrom(runID, jobID, 0, 0, lines(0, 1)); err != nil || res.Stored != 1 {
			t.Fatalf("append after removal: %+v %v", res, err)
		}
	})
}

// On PostgreSQL a chunk large enough to be compressed is compressed with
// lz4 (migration toast_lz4), and reads back whole.
func TestPGChunksCompressWithLZ4(t *testing.T) {
	p := openPG(t, migratedDatabase(t))
	if err := p.Append(runID, jobID, 0, lines(0, 500)); err != nil {
		t.Fatal(err)
	}
	var method string
	if err := p.pool.QueryRow(context.Background(),
		`SELECT COALESCE(pg_column_compression(body), 'none') FROM step_log_chunks WHERE job_id = $1`, jobID).Scan(&method); err != nil {
		t.Fatal(err)
	}
	if method != "lz4" {
		t.Fatalf("chunk compression = %s, want lz4", method)
	}
	if got := texts(t, p, 0); len(got) != 500 || got[499] != lines(499, 1)[0].Text {
		t.Fatalf("read back %d lines, last %q", len(got), got[len(got)-1])
	}
}
