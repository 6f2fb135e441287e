package logstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"kici.dev/kici/internal/protocol"
)

const (
	runID = "0b6c0f5e-2a43-4c43-9b0e-5f1a2b3c4d5e"
	jobID = "7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6"
)

func lines(from, n int) []protocol.LogLine {
	out := make([]protocol.LogLine, n)
	for i := range out {
		out[i] = protocol.LogLine{Timestamp: int64(1000 + from + i), Stream: protocol.StreamStdout, Text: fmt.Sprintf("line %d", from+i)}
	}
	return out
}

func TestAppendReadPagination(t *testing.T) {
	fs := NewFS(t.TempDir())
	if err := fs.Append(runID, jobID, 0, lines(0, 5)); err != nil {
		t.Fatal(err)
	}
	if err := fs.Append(runID, jobID, 0, lines(5, 3)); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := 0
	for pages := 0; ; pages++ {
		page, next, err := fs.Read(runID, jobID, 0, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			if next != cursor {
				t.Fatalf("empty page moved cursor %d -> %d", cursor, next)
			}
			if pages != 3 {
				t.Fatalf("pages = %d, want 3", pages)
			}
			break
		}
		if next != cursor+len(page) {
			t.Fatalf("next = %d, want %d", next, cursor+len(page))
		}
		for _, l := range page {
			got = append(got, l.Text)
		}
		cursor = next
	}
	want := []string{"line 0", "line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %v, want %v", got, want)
	}

	// Follow: lines appended after a read are returned from the saved cursor.
	if err := fs.Append(runID, jobID, 0, lines(8, 2)); err != nil {
		t.Fatal(err)
	}
	page, next, err := fs.Read(runID, jobID, 0, cursor, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].Text != "line 8" || page[1].Text != "line 9" || next != 10 {
		t.Fatalf("follow read = %+v next %d", page, next)
	}
	if page[0].Timestamp != 1008 || page[0].Stream != protocol.StreamStdout {
		t.Fatalf("fields not preserved: %+v", page[0])
	}
}

func TestReadMissingAndSpecialText(t *testing.T) {
	root := t.TempDir()
	fs := NewFS(root)
	page, next, err := fs.Read(runID, jobID, 2, 4, 10)
	if err != nil || len(page) != 0 || next != 4 {
		t.Fatalf("missing log: %v %d %v", page, next, err)
	}
	special := []protocol.LogLine{{Timestamp: 1, Stream: protocol.StreamStderr, Text: "multi\nline <b>&\"quoted\""}}
	if err := fs.Append(runID, jobID, JobStepIndex, special); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, runID, jobID, "job.log")); err != nil {
		t.Fatalf("job-level log file: %v", err)
	}
	page, _, err = fs.Read(runID, jobID, JobStepIndex, 0, 10)
	if err != nil || len(page) != 1 || page[0] != special[0] {
		t.Fatalf("read back %+v, %v", page, err)
	}
}

func TestPartialTrailingLineNotReturned(t *testing.T) {
	root := t.TempDir()
	fs := NewFS(root)
	if err := fs.Append(runID, jobID, 1, lines(0, 2)); err != nil {
		t.Fatal(err)
	}
	path, _ := fs.Path(runID, jobID, 1)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"ts":5,"msg":"half`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	page, next, err := fs.Read(runID, jobID, 1, 0, 10)
	if err != nil || len(page) != 2 || next != 2 {
		t.Fatalf("got %d lines next %d err %v", len(page), next, err)
	}
}

func TestTraversalRejected(t *testing.T) {
	root := t.TempDir()
	fs := NewFS(filepath.Join(root, "logs"))
	bad := []struct {
		run, job string
		step     int
	}{
		{"..", jobID, 0},
		{runID, "..", 0},
		{"../escape", jobID, 0},
		{runID, "a/b", 0},
		{runID, `a\b`, 0},
		{"", jobID, 0},
		{runID, "", 0},
		{runID, "x.y", 0},
		{runID, "id%2F..", 0},
		{runID, jobID, -3},
		{strings.Repeat("a", 129), jobID, 0},
	}
	for _, b := range bad {
		if err := fs.Append(b.run, b.job, b.step, lines(0, 1)); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Append(%q,%q,%d) err = %v, want ErrInvalidPath", b.run, b.job, b.step, err)
		}
		if _, _, err := fs.Read(b.run, b.job, b.step, 0, 1); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Read(%q,%q,%d) err = %v, want ErrInvalidPath", b.run, b.job, b.step, err)
		}
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 0 {
		t.Fatalf("something was written: %v", entries)
	}
	if _, _, err := fs.Read(runID, jobID, 0, -1, 1); err == nil {
		t.Fatal("negative cursor accepted")
	}
}

// TestBuildStepLogIsItsOwnFile: the container image build (step -2) has
// a log of its own, build.log, apart from the setup log job.log.
func TestBuildStepLogIsItsOwnFile(t *testing.T) {
	fs := NewFS(t.TempDir())
	if err := fs.Append(runID, jobID, BuildStepIndex, lines(0, 2)); err != nil {
		t.Fatal(err)
	}
	p, err := fs.Path(runID, jobID, BuildStepIndex)
	if err != nil || filepath.Base(p) != "build.log" {
		t.Fatalf("build log path %q, %v", p, err)
	}
	got, _, err := fs.Read(runID, jobID, BuildStepIndex, 0, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("build log: %d lines, %v", len(got), err)
	}
	if setup, _, _ := fs.Read(runID, jobID, JobStepIndex, 0, 10); len(setup) != 0 {
		t.Errorf("the build's lines reached the setup log: %v", setup)
	}
}

func TestConcurrentAppends(t *testing.T) {
	fs := NewFS(t.TempDir())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := fs.Append(runID, jobID, 3, lines(g*1000+i*2, 2)); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	page, next, err := fs.Read(runID, jobID, 3, 0, MaxReadLimit)
	if err != nil || len(page) != 800 || next != 800 {
		t.Fatalf("got %d lines next %d err %v", len(page), next, err)
	}
}
