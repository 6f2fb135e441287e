package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/blobstore/blobtest"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// A finished job's step logs move from PostgreSQL to the S3 blob store:
// the orchestrator archives them once the job is done, its
// step_log_chunks rows are deleted, and the log reads back with every
// line, in order, through the API (page by page) and through `kici-admin
// runs logs`. A step printing past KICI_STEP_LOG_MAX_BYTES ends with the
// cap's marker line and its job still succeeds.
func TestLogArchiveMovesFinishedLogsToS3AndReadsThemBack(t *testing.T) {
	const n = 30000
	db := pgtest.URL(t)
	s3 := blobtest.Server(t)
	o := startOrchestrator(t, "KICI_DATABASE_URL="+db,
		"KICI_STORAGE_TYPE=s3", "KICI_STORAGE_BUCKET="+blobtest.Bucket, "KICI_STORAGE_ENDPOINT="+s3,
		"KICI_STORAGE_FORCE_PATH_STYLE=true", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"KICI_LOG_ARCHIVE_AFTER_MS=0", "KICI_STEP_LOG_MAX_BYTES=3145728")
	repo := repoWithWorkflow(t, fmt.Sprintf(`name: archived
on: {push: {branches: [main]}}
jobs:
  print:
    steps:
      - run: seq 1 %d | sed 's/^/line /'
      - run: echo second step
  runaway:
    steps:
      - run: seq 1 200000 | sed 's/^/runaway output line /'
      - run: echo after the runaway step
`, n))
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	if r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run = %s (%s)", r.Status, r.FailureReason)
	}
	jobID := o.jobsOf(t, runID)["print"].JobID

	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var archived, rows int
	wait.For(t, 60*time.Second, "the job's step logs to be archived and their rows deleted", func() bool {
		err := conn.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM step_log_heads WHERE job_id = $1 AND archive IS NOT NULL),
			(SELECT count(*) FROM step_log_chunks WHERE job_id = $1)`, jobID).Scan(&archived, &rows)
		if err != nil {
			t.Fatal(err)
		}
		return archived >= 2 && rows == 0
	})
	// The runaway step passed KICI_STEP_LOG_MAX_BYTES: its log ends with the
	// cap's marker, the job still succeeded, and the next step was logged.
	runaway := o.jobsOf(t, runID)["runaway"]
	if runaway.Status != "success" {
		t.Fatalf("the runaway job = %s, want success", runaway.Status)
	}
	capped := o.readLog(t, runID, runaway.JobID, 0)
	if len(capped) < 10000 || len(capped) > 60000 || !strings.HasPrefix(capped[len(capped)-1], "[kici] log truncated:") ||
		capped[0] != "runaway output line 1" {
		t.Fatalf("capped log: %d lines, last %q", len(capped), capped[len(capped)-1])
	}
	if next := o.readLog(t, runID, runaway.JobID, 1); len(next) != 1 || next[0] != "after the runaway step" {
		t.Fatalf("step after the runaway one = %q", next)
	}

	got := o.readLog(t, runID, jobID, 0)
	if err := checkSequence(got, n, func(i int) string { return "line " + strconv.Itoa(i+1) }); err != nil {
		t.Fatalf("archived log through the API: %v", err)
	}
	out := o.admin(t, "runs", "logs", runID, "--job", "print", "--step", "0", "--raw")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if err := checkSequence(lines, n, func(i int) string { return "line " + strconv.Itoa(i+1) }); err != nil {
		t.Fatalf("archived log through kici-admin runs logs: %v", err)
	}
	if s := o.readLog(t, runID, jobID, 1); len(s) != 1 || s[0] != "second step" {
		t.Fatalf("second step's archived log = %q", s)
	}
	if v := sample(scrape(t, o), "kici_orch_log_archived_steps_total"); v < 2 {
		t.Errorf("kici_orch_log_archived_steps_total = %v, want at least 2", v)
	}
	if b, err := os.ReadFile(o.logPath); err != nil || !strings.Contains(string(b), "archived step logs") {
		t.Errorf("the orchestrator did not log its archive pass (%v)", err)
	}
}
