package logstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

func texts(t *testing.T, fs Store, step int) []string {
	t.Helper()
	var out []string
	for cursor := 0; ; {
		page, next, err := fs.Read(runID, jobID, step, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		for _, l := range page {
			out = append(out, l.Text)
		}
		cursor = next
	}
}

func want(n int) string {
	var w []string
	for i := 0; i < n; i++ {
		w = append(w, fmt.Sprintf("line %d", i))
	}
	return strings.Join(w, "|")
}

// A log written without an index (an older version) or with a torn last
// line (a crash mid-write) is indexed on first use, the torn line cut off.
func TestIndexRebuiltFromTheLog(t *testing.T) {
	root := t.TempDir()
	fs := NewFS(root)
	if _, err := fs.AppendFrom(runID, jobID, 0, 0, lines(0, 50)); err != nil {
		t.Fatal(err)
	}
	path, _ := fs.Path(runID, jobID, 0)
	idx := strings.TrimSuffix(path, ".log") + ".idx"
	if err := os.Remove(idx); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if _, err := f.WriteString(`{"ts":5,"msg":"to`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fs2 := NewFS(root)
	if got := strings.Join(texts(t, fs2, 0), "|"); got != want(50) {
		t.Fatalf("rebuilt log = %s", got)
	}
	res, err := fs2.AppendFrom(runID, jobID, 0, 48, lines(48, 4))
	if err != nil || res.Stored != 2 || res.Acked != 52 {
		t.Fatalf("append after rebuild: %+v %v", res, err)
	}
	if got := strings.Join(texts(t, fs2, 0), "|"); got != want(52) {
		t.Fatalf("log = %s", got)
	}
	if st, _ := os.Stat(idx); st == nil || st.Size() != 52*8 {
		t.Fatalf("index size %v", st)
	}
}

// A batch whose write was cut short by a kill -9 (the orchestrator died in
// the middle of writing it, before the index and before the ack) leaves a
// prefix of its lines in the log. After the restart the agent replays the
// whole batch from its last acknowledged offset: the prefix already held is
// skipped line by line, so every line is stored exactly once.
func TestReplayAfterWriteCutMidBatchStoresEachLineOnce(t *testing.T) {
	root := t.TempDir()
	fs := NewFS(root)
	if _, err := fs.AppendFrom(runID, jobID, 0, 0, lines(0, 10)); err != nil {
		t.Fatal(err)
	}
	if err := fs.Append(runID, jobID, 0, []protocol.LogLine{{Text: "orchestrator note"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.AppendFrom(runID, jobID, 0, 10, lines(10, 10)); err != nil {
		t.Fatal(err)
	}
	// Cut the second batch after its 5th line and half of its 6th, and its
	// index entries with it: what a write killed mid-way leaves.
	path, _ := fs.Path(runID, jobID, 0)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ends := []int{}
	for i, b := range raw {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	cut := ends[15] + (ends[16]-ends[15])/2 // 11 lines before the batch, then 5 whole lines
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(strings.TrimSuffix(path, ".log")+".idx", 11*8); err != nil {
		t.Fatal(err)
	}

	fs2 := NewFS(root)
	res, err := fs2.AppendFrom(runID, jobID, 0, 10, lines(10, 10))
	if err != nil || res.Stored != 5 || res.Duplicate != 5 || res.Acked != 20 {
		t.Fatalf("replay after the cut: %+v %v", res, err)
	}
	got := strings.Join(texts(t, fs2, 0), "|")
	wantLog := strings.Replace(want(20), "line 9|", "line 9|orchestrator note|", 1)
	if got != wantLog {
		t.Fatalf("log after replay:\n got %s\nwant %s", got, wantLog)
	}
	// A second replay of both batches changes nothing.
	if res, err := fs2.AppendFrom(runID, jobID, 0, 0, lines(0, 20)); err != nil || res.Stored != 0 || res.Duplicate != 20 {
		t.Fatalf("second replay: %+v %v", res, err)
	}
}

// Wait returns as soon as a line beyond the cursor is stored.
func TestWaitWakesOnAppend(t *testing.T) {
	fs := NewFS(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := fs.Wait(ctx, runID, jobID, 1, 0); err != context.DeadlineExceeded {
		t.Fatalf("wait on an empty log: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- fs.Wait(context.Background(), runID, jobID, 1, 0) }()
	wait.For(t, 5*time.Second, "Wait to register", func() bool {
		fs.appended.mu.Lock()
		defer fs.appended.mu.Unlock()
		return len(fs.appended.m) > 0
	})
	if err := fs.Append(runID, jobID, 1, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not wake on append")
	}
	if err := fs.Wait(context.Background(), runID, jobID, 1, 0); err != nil {
		t.Fatal("a log that already has the line must not wait")
	}
}

func BenchmarkAppendFrom(b *testing.B) {
	fs := NewFS(b.TempDir())
	batch := lines(0, 500)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := fs.AppendFrom(runID, jobID, 0, int64(i*len(batch)), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkReadPage reads a 1000-line page at the start and at the end of a
// 200,000-line log: with the index both cost the same.
func BenchmarkReadPage(b *testing.B) {
	fs := NewFS(b.TempDir())
	for i := 0; i < 200; i++ {
		if err := fs.Append(runID, jobID, 0, lines(i*1000, 1000)); err != nil {
			b.Fatal(err)
		}
	}
	for _, at := range []int{0, 199000} {
		b.Run(fmt.Sprintf("cursor=%d", at), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if page, _, err := fs.Read(runID, jobID, 0, at, 1000); err != nil || len(page) != 1000 {
					b.Fatal(len(page), err)
				}
			}
		})
	}
}

// Removing a run's logs also forgets the files this store had open: a read
// afterwards finds the log gone, and a new append starts a new log.
func TestRemoveRunForgetsOpenFiles(t *testing.T) {
	fs := NewFS(t.TempDir())
	if _, err := fs.AppendFrom(runID, jobID, 0, 0, lines(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveRun(runID); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, fs, 0); len(got) != 0 {
		t.Fatalf("removed log still reads %v", got)
	}
	if res, err := fs.AppendFrom(runID, jobID, 0, 0, lines(0, 1)); err != nil || res.Stored != 1 {
		t.Fatalf("append after removal: %+v %v", res, err)
	}
}
