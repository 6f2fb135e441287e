package e2e

// Acceptance tests of the log pipeline with the real binaries: every line a
// step prints is stored once, in order, through a real agent; stdout and
// stderr keep their write order; and an orchestrator that is down for 10 s
// while a step prints loses nothing.
//
// TestLogLinesAllStoredInOrder prints KICI_TEST_LOG_LINES lines (200,000
// by default; `make test-logs-long` runs it with 1,000,000) and logs the
// end-to-end rate as "log throughput: …".

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// readLog pages through a step's log with the API's cursor and returns the
// text of every line.
func (o *orchestrator) readLog(t *testing.T, runID, jobID string, step int) []string {
	t.Helper()
	var out []string
	for cursor := 0; ; {
		var page struct {
			Lines []struct {
				Msg string `json:"msg"`
			} `json:"lines"`
			NextCursor int `json:"nextCursor"`
		}
		o.get(t, fmt.Sprintf("/api/v1/admin/runs/%s/jobs/%s/steps/%d/logs?cursor=%d&limit=2000", runID, jobID, step, cursor), &page)
		for _, l := range page.Lines {
			out = append(out, l.Msg)
		}
		if len(page.Lines) == 0 {
			return out
		}
		cursor = page.NextCursor
	}
}

// checkSequence reports the first place where got differs from want(i) for
// i in 0..n-1, or a count mismatch.
func checkSequence(got []string, n int, want func(i int) string) error {
	for i := 0; i < min(len(got), n); i++ {
		if got[i] != want(i) {
			return fmt.Errorf("line %d is %q, want %q (%d lines stored)", i, got[i], want(i), len(got))
		}
	}
	if len(got) != n {
		return fmt.Errorf("%d lines stored, want %d", len(got), n)
	}
	return nil
}

func TestLogLinesAllStoredInOrder(t *testing.T) {
	n := 200000
	if v := os.Getenv("KICI_TEST_LOG_LINES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("KICI_TEST_LOG_LINES=%q: want a positive number", v)
		}
	}
	repo := repoWithWorkflow(t, fmt.Sprintf(`name: loud
on: {push: {branches: [main]}}
jobs:
  many:
    steps:
      - run: seq 1 %d
  alternating:
    steps:
      - run: |
          i=0
          while [ $i -lt 10000 ]; do
            echo "out $i"
            i=$((i+1))
            echo "err $i" >&2
            i=$((i+1))
          done
`, n))
	o := startOrchestratorAt(t, t.TempDir(), freePort(t))
	start := time.Now()
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 5*time.Minute, "success", "failed", "cancelled")
	elapsed := time.Since(start)
	if r.Status != "success" {
		t.Fatalf("run = %s (%s)", r.Status, r.FailureReason)
	}
	jobs := o.jobsOf(t, runID)

	got := o.readLog(t, runID, jobs["many"].JobID, 0)
	if err := checkSequence(got, n, func(i int) string { return strconv.Itoa(i + 1) }); err != nil {
		t.Fatalf("step printing %d lines: %v", n, err)
	}
	t.Logf("log throughput: %d lines printed, %d stored, run done in %s: %.0f lines/s end to end",
		n, len(got), elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())

	alt := o.readLog(t, runID, jobs["alternating"].JobID, 0)
	if err := checkSequence(alt, 10000, func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("out %d", i)
		}
		return fmt.Sprintf("err %d", i)
	}); err != nil {
		t.Fatalf("alternating stdout/stderr: %v", err)
	}
	if b, err := os.ReadFile(o.logPath); err == nil && strings.Contains(string(b), "log lines missing") {
		t.Errorf("the orchestrator reports missing log lines")
	}
	m := scrape(t, o)
	if v := sample(m, `kici_orch_log_lines_total{result="dropped"}`); v != 0 {
		t.Errorf("dropped log lines = %v, want 0", v)
	}
	if v := sample(m, `kici_orch_log_lines_total{result="stored"}`); v < float64(n+10000) {
		t.Errorf("stored log lines = %v, want at least %d", v, n+10000)
	}
}

// A step keeps printing while the orchestrator is killed and stays down
// for 10 s; after the restart the agent replays what it held and every
// line is stored exactly once, in order.
func TestLogsSurviveTenSecondOrchestratorOutage(t *testing.T) {
	marks := marksDir(t)
	// 450,000 lines over about 15 s: during the outage the agent holds more
	// than its 8 MiB memory bound (so it spills) and more than the 5,000
	// frames an older agent kept before dropping the oldest.
	const batches, per = 150, 3000
	repo := repoWithWorkflow(t, fmt.Sprintf(`name: steady
on: {push: {branches: [main]}}
jobs:
  print:
    steps:
      - run: |
          i=0
          while [ $i -lt %d ]; do
            seq $((i*%d+1)) $((i*%d+%d))
            [ $i -eq 10 ] && touch %s/started
            i=$((i+1))
            sleep 0.1
          done
`, batches, per, per, per, marks))
	dataDir := t.TempDir()
	port := freePort(t)
	o := startOrchestratorAt(t, dataDir, port)
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	wait.For(t, 60*time.Second, "the step to print", func() bool {
		_, err := os.Stat(filepath.Join(marks, "started"))
		return err == nil
	})
	o.kill9(t)
	wait.Elapse(t.Context(), 10*time.Second) // the outage: the step writes on while no orchestrator listens
	o2 := startOrchestratorAt(t, dataDir, port)
	r := o2.waitRunStatus(t, runID, 2*time.Minute, "success", "failed", "cancelled")
	if r.Status != "success" {
		t.Fatalf("run after the outage = %s (%s)", r.Status, r.FailureReason)
	}
	jobs := o2.jobsOf(t, runID)
	got := o2.readLog(t, runID, jobs["print"].JobID, 0)
	if err := checkSequence(got, batches*per, func(i int) string { return strconv.Itoa(i + 1) }); err != nil {
		t.Fatalf("after a 10 s outage: %v", err)
	}
}
