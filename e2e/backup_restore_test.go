package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// A push workflow whose job runs on the embedded agent and finishes.
const helloWorkflow = `name: hello
on:
  push:
    branches: [main]
jobs:
  say:
    steps:
      - run: echo hello
`

// A push workflow whose job asks for a label no agent has: it stays
// queued (in flight) until something ends it.
const stuckWorkflow = `name: stuck
on:
  push:
    branches: [main]
jobs:
  wait:
    runsOn: [e2e-backup-nowhere]
    steps:
      - run: echo never
`

// A schedule on whole minutes whose job needs no agent to be counted.
const minuteWorkflow = `name: minutely
on:
  schedule:
    cron: "@every 1m"
jobs:
  tick:
    runsOn: [e2e-backup-nowhere]
    steps:
      - run: echo tick
`

// scheduleFiresSince returns the instants (unix seconds) of the schedule
// deliveries o received at or after since.
func scheduleFiresSince(t *testing.T, o *orchestrator, since time.Time) []int64 {
	t.Helper()
	var page struct {
		Deliveries []struct {
			DeliveryID string    `json:"deliveryId"`
			Status     string    `json:"status"`
			ReceivedAt time.Time `json:"receivedAt"`
		} `json:"deliveries"`
	}
	o.get(t, "/api/v1/admin/event-log?event=schedule&limit=200", &page)
	var out []int64
	for _, d := range page.Deliveries {
		if d.Status == "missed" || d.Status == "duplicate" || d.ReceivedAt.Before(since) {
			continue
		}
		parts := strings.Split(d.DeliveryID, ":")
		sec, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
		if err != nil {
			t.Fatalf("schedule delivery id %q", d.DeliveryID)
		}
		out = append(out, sec)
	}
	return out
}

// runsOf lists the runs of workflow wf.
func runsOf(t *testing.T, o *orchestrator, wf string) []runView {
	t.Helper()
	var list struct {
		Runs []runView `json:"runs"`
	}
	o.get(t, "/api/v1/admin/runs?limit=200", &list)
	var out []runView
	for _, r := range list.Runs {
		if r.WorkflowName == wf {
			out = append(out, r)
		}
	}
	return out
}

// `kici-admin backup` of a running embedded orchestrator (a finished run,
// schedule runs whose job waits for an agent that never comes: in flight),
// restored into a new data directory with its key and started: the
// finished run is there once, the jobs in flight at backup time are failed
// with the restore reason instead of running again, and no schedule
// instant that fell due before the start fires (the instant the original
// fired after the backup is not caught up).
func TestBackupRestoreStartsSafely(t *testing.T) {
	repo := repoWithWorkflows(t, map[string]string{"minutely.yaml": minuteWorkflow, "hello.yaml": helloWorkflow, "stuck.yaml": stuckWorkflow})

	o := startIn(t, t.TempDir())
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "app", "--quiet")
	o.admin(t, "source", "trigger-local", src, "--quiet") // registers the schedule, runs hello and stuck
	wait.For(t, 120*time.Second, "hello to succeed and stuck to queue", func() bool {
		h, s := runsOf(t, o, "hello"), runsOf(t, o, "stuck")
		return len(h) == 1 && h[0].Status == "success" && len(s) == 1 && o.jobsOf(t, s[0].RunID)["wait"].Status == "queued"
	})
	stuck := runsOf(t, o, "stuck")[0]

	backup := filepath.Join(t.TempDir(), "kici-backup.db")
	out := o.admin(t, "backup", "--out", backup, "--with-key")
	if !strings.Contains(out, backup) || !strings.Contains(out, "blobs") {
		t.Fatalf("backup output does not name the copy and what to keep:\n%s", out)
	}
	for _, f := range []string{backup, backup + ".secret.key"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v (want a 0600 file)", f, err)
		}
	}
	if again := o.adminFails(t, "backup", "--out", backup); !strings.Contains(again, "already exists") {
		t.Fatalf("a second backup onto the same file: %s", again)
	}
	o.stop(t)
	// A schedule instant falls due while no node runs: a start on the copy
	// that caught up would fire it (the copy's registration predates it,
	// well within the catch-up window). @every 1m falls on whole minutes.
	unfired := time.Unix((time.Now().Unix()/60+1)*60, 0)
	wait.For(t, time.Until(unfired)+10*time.Second, "the outage to span a schedule instant", func() bool { return time.Now().After(unfired.Add(time.Second)) })

	restored := t.TempDir()
	for src, dst := range map[string]string{backup: "kici.db", backup + ".secret.key": "secret.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(restored, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startedAt := time.Now()
	r := startIn(t, restored)

	r.waitRunStatus(t, stuck.RunID, 60*time.Second, "failed")
	if j := r.jobsOf(t, stuck.RunID)["wait"]; j.Status != "failed" || !strings.Contains(j.ErrorMessage, "ended on restore: in flight when the backup was taken") {
		t.Fatalf("in-flight job after restore: %s %q", j.Status, j.ErrorMessage)
	}
	if hello := runsOf(t, r, "hello"); len(hello) != 1 || hello[0].Status != "success" {
		t.Fatalf("hello runs after restore: %+v (want the one finished run)", hello)
	}
	if s := runsOf(t, r, "stuck"); len(s) != 1 {
		t.Fatalf("stuck runs after restore: %+v (want the backup's one, not re-run)", s)
	}
	// The restored node fires the schedule live (the first whole minute
	// after its start, once it holds the lease) and no instant before it.
	wait.For(t, 150*time.Second, "a schedule fire on the restored node", func() bool { return len(scheduleFiresSince(t, r, startedAt)) > 0 })
	fires := scheduleFiresSince(t, r, startedAt)
	for _, sec := range fires {
		if sec < startedAt.Unix() {
			t.Fatalf("restored node fired instant %s, before its start %s (caught up the backup's past)",
				time.Unix(sec, 0).UTC().Format(time.RFC3339), startedAt.UTC().Format(time.RFC3339))
		}
	}
	t.Logf("restore start: instant %s not fired; live fires %v", unfired.UTC().Format(time.RFC3339), fires)
}
