package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// A schedule every 10 s whose job needs no agent to be counted.
const tenSecondsWorkflow = `name: minutely
on:
  schedule:
    cron: "@every 10s"
jobs:
  tick:
    runsOn: [e2e-backup-nowhere]
    steps:
      - run: echo tick
`

// copiedLog is what a node logs when it starts on a restored copy.
const copiedLog = "this database is a restored copy"

// A `pg_dump` of a live PostgreSQL-backed node (a finished run, a job in
// flight, a schedule) restored with `pg_restore` into a new database and
// started: the node finds the database's identity changed, ends the job in
// flight at dump time with the restore reason instead of running it again,
// fires no schedule instant due before its start, and keeps the finished
// run once. Restarts on the same database, before and after, are ordinary.
func TestRestorePgDumpIntoNewDatabaseStartsSafely(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, ".kici/workflows/minutely.yaml"), tenSecondsWorkflow)
	write(t, filepath.Join(repo, ".kici/workflows/hello.yaml"), helloWorkflow)
	write(t, filepath.Join(repo, ".kici/workflows/stuck.yaml"), stuckWorkflow)
	run(t, repo, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "workflows")

	origURL, copyURL := pgtest.URL(t), pgtest.URL(t)
	key := "KICI_SECRET_KEY=" + haSecretKey
	dir := t.TempDir()
	o := startIn(t, dir, "KICI_DATABASE_URL="+origURL, key)
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "app", "--quiet")
	o.admin(t, "source", "trigger-local", src, "--quiet")
	wait.For(t, 120*time.Second, "hello to succeed and stuck to queue", func() bool {
		h, s := runsOf(t, o, "hello"), runsOf(t, o, "stuck")
		return len(h) == 1 && h[0].Status == "success" && len(s) == 1 && o.jobsOf(t, s[0].RunID)["wait"].Status == "queued"
	})
	stuck := runsOf(t, o, "stuck")[0]
	// An ordinary restart on the same database is no restore.
	o.stop(t)
	o = startIn(t, dir, "KICI_DATABASE_URL="+origURL, key)
	if j := o.jobsOf(t, stuck.RunID)["wait"]; j.Status != "queued" {
		t.Fatalf("after a plain restart the in-flight job is %s %q, want still queued", j.Status, j.ErrorMessage)
	}

	dump := filepath.Join(t.TempDir(), "kici.dump")
	if out, err := exec.Command("pg_dump", "--format=custom", "--file="+dump, origURL).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	o.stop(t)
	if strings.Contains(readFile(t, o.logPath), copiedLog) {
		t.Fatalf("a restart on the same database was taken for a restore:\n%s", readFile(t, o.logPath))
	}
	// A schedule instant falls due while no node runs: a start on the copy
	// that caught up would fire it.
	unfired := time.Unix((time.Now().Unix()/10+1)*10, 0)
	wait.For(t, time.Until(unfired)+5*time.Second, "the outage to span a schedule instant", func() bool { return time.Now().After(unfired.Add(time.Second)) })
	if out, err := exec.Command("pg_restore", "--no-owner", "--dbname="+copyURL, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore into a new database: %v\n%s", err, out)
	}

	startedAt := time.Now()
	rdir := t.TempDir()
	r := startIn(t, rdir, "KICI_DATABASE_URL="+copyURL, key)
	r.waitRunStatus(t, stuck.RunID, 60*time.Second, "failed")
	if j := r.jobsOf(t, stuck.RunID)["wait"]; j.Status != "failed" || !strings.Contains(j.ErrorMessage, "ended on restore: in flight when the backup was taken") {
		t.Fatalf("in-flight job after the restore: %s %q", j.Status, j.ErrorMessage)
	}
	if log := readFile(t, r.logPath); !strings.Contains(log, copiedLog) {
		t.Errorf("the restored node did not say why it ended the job:\n%s", log)
	}
	if hello := runsOf(t, r, "hello"); len(hello) != 1 || hello[0].Status != "success" {
		t.Fatalf("hello runs after the restore: %+v (want the one finished run)", hello)
	}
	if s := runsOf(t, r, "stuck"); len(s) != 1 {
		t.Fatalf("stuck runs after the restore: %+v (want the dump's one, not re-run)", s)
	}
	wait.For(t, 40*time.Second, "a schedule fire on the restored node", func() bool { return len(scheduleFiresSince(t, r, startedAt)) > 0 })
	fires := scheduleFiresSince(t, r, startedAt)
	for _, sec := range fires {
		if sec < startedAt.Unix() {
			t.Fatalf("restored node fired instant %s, before its start %s (caught up the dump's past)",
				time.Unix(sec, 0).UTC().Format(time.RFC3339), startedAt.UTC().Format(time.RFC3339))
		}
	}
	// The next start on the restored database is an ordinary one.
	r.stop(t)
	r2 := startIn(t, rdir, "KICI_DATABASE_URL="+copyURL, key)
	if strings.Contains(readFile(t, r2.logPath), copiedLog) {
		t.Errorf("a restart on the restored database was taken for another restore")
	}
	t.Logf("pg_restore start: instant %s not fired; live fires %v", unfired.UTC().Format(time.RFC3339), fires)
}
