package e2e

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
)

// runRecord is what an operator checks survived an upgrade: the run, its
// jobs' statuses and the first job's log.
func runRecord(t *testing.T, o *orchestrator, runID string) string {
	t.Helper()
	var run runView
	o.get(t, "/api/v1/admin/runs/"+runID, &run)
	var jobs struct {
		Jobs []jobView `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+runID+"/jobs", &jobs)
	rec := fmt.Sprintf("run %s %s %s;", run.RunID, run.WorkflowName, run.Status)
	for _, j := range jobs.Jobs {
		rec += fmt.Sprintf(" %s=%s", j.JobName, j.Status)
		if j.JobName == "first" {
			rec += " [" + o.logText(t, runID, j.JobID, 0) + "]"
		}
	}
	return rec
}

// The upgrade and rollback procedure of docs/upgrade.md, on PostgreSQL with
// the real binaries: a database at the previous release's schema (this
// binary's migrations rolled back by one, with a finished run in it) is
// migrated by the node at start, which then serves it and runs new work
// with nothing lost; rolling the schema back again (what a rollback to the
// previous release does before starting the old binary) and forward again
// keeps every run, job and log line.
func TestUpgradeFromPreviousSchemaLosesNothing(t *testing.T) {
	repo, _ := makeRepo(t)
	dir := t.TempDir()
	db := "KICI_DATABASE_URL=" + pgtest.URL(t)
	o := startIn(t, dir, db)
	sourceID, delivery := o.push(t, repo, "")
	first := o.waitRun(t, delivery, 4*time.Minute)
	before := runRecord(t, o, first.RunID)
	o.stop(t)

	var want int64
	status := migrateCmd(t, o, 0, "status")
	if _, err := fmt.Sscanf(status, "schema version %d", &want); err != nil {
		t.Fatal(err)
	}
	// kici-admin migrate runs the same command (in kici-orchestrator).
	viaAdmin := exec.Command(filepath.Join(binDir, "kici-admin"), "migrate", "status")
	viaAdmin.Env = append(cleanEnv(), o.env...)
	if code, out := exitCode(t, viaAdmin); code != 0 || out != status {
		t.Fatalf("kici-admin migrate status: exit %d %q, want 0 %q", code, out, status)
	}
	previous := strconv.FormatInt(want-1, 10)
	migrateCmd(t, o, 0, "down-to", previous)
	if out := migrateCmd(t, o, 1, "status"); !strings.HasPrefix(out, "schema version "+previous+";") {
		t.Fatalf("after down-to %s: %s", previous, out)
	}

	// The new binary starts on the previous schema: migrates, serves.
	o = startIn(t, dir, db)
	if out := migrateCmd(t, o, 0, "status"); !strings.HasPrefix(out, fmt.Sprintf("schema version %d;", want)) {
		t.Fatalf("the node did not migrate at start: %s", out)
	}
	if code, body := probe(t, o.url, "/ready"); code != http.StatusOK {
		t.Fatalf("/ready after the upgrade: %d %s", code, body)
	}
	if after := runRecord(t, o, first.RunID); after != before {
		t.Fatalf("the run changed across the upgrade:\nbefore %s\nafter  %s", before, after)
	}
	_, delivery = o.push(t, repo, sourceID)
	second := o.waitRun(t, delivery, 4*time.Minute)
	if second.Status != first.Status {
		t.Fatalf("a run after the upgrade ended %s, the same workflow before it %s", second.Status, first.Status)
	}
	afterUpgrade := runRecord(t, o, second.RunID)
	o.stop(t)

	// Rollback (schema back to the previous release's), then forward again.
	migrateCmd(t, o, 0, "down-to", previous)
	o = startIn(t, dir, db)
	if got := runRecord(t, o, first.RunID); got != before {
		t.Fatalf("the first run changed across rollback and upgrade:\nbefore %s\nafter  %s", before, got)
	}
	if got := runRecord(t, o, second.RunID); got != afterUpgrade {
		t.Fatalf("the second run changed across rollback and upgrade:\nbefore %s\nafter  %s", afterUpgrade, got)
	}
}
