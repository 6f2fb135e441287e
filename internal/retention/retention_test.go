package retention

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

func TestLoadConfigDefaultsAndErrors(t *testing.T) {
	cfg, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	if cfg.Runs != 90*day || cfg.Audit != 365*day || cfg.Provenance != 365*day || cfg.HeldRuns != 90*day || cfg.Queue != 30*day || cfg.StepLogs != 90*day {
		t.Fatalf("defaults %+v", cfg)
	}
	cfg, err = LoadConfig([]string{"KICI_RUN_RETENTION_DAYS=0", "KICI_STEP_LOG_TTL_DAYS=7"})
	if err != nil || cfg.Runs != 0 || cfg.StepLogs != 7*day {
		t.Fatalf("overrides %+v %v", cfg, err)
	}
	for _, bad := range []string{"-1", "ten", "1.5", "99999"} {
		if _, err := LoadConfig([]string{"KICI_AUDIT_RETENTION_DAYS=" + bad}); err == nil || !strings.Contains(err.Error(), "KICI_AUDIT_RETENTION_DAYS") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A sweep deletes a run finished before the retention period with its
// logs, keeps a recent one and its logs, clears old log files of a kept
// run after the step-log TTL, and counts all of it in the metric.
func TestSweepOnceDeletesExpiredRunsAndLogs(t *testing.T) {
	ctx := context.Background()
	st := teststore.SQLite(t)
	logs := logstore.NewFS(t.TempDir())
	now := time.Now().UTC()
	mk := func(id string, finished time.Time) {
		run := &store.Run{ID: id, WorkflowName: "ci", Status: "pending", Provider: "local", RepoIdentifier: "a/b", CreatedAt: finished.Add(-time.Minute)}
		job := &store.Job{ID: id + "-j", RunID: id, JobName: "j", BaseJobName: "j", Status: "queued", CreatedAt: run.CreatedAt}
		if err := st.CreateRun(ctx, run, []*store.Job{job}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateRunStatus(ctx, id, nil, "success", store.RunUpdate{CompletedAt: &finished}); err != nil {
			t.Fatal(err)
		}
		if err := logs.Append(id, id+"-j", 0, []protocol.LogLine{{Text: "hello", Stream: protocol.StreamStdout}}); err != nil {
			t.Fatal(err)
		}
	}
	mk("old", now.Add(-100*24*time.Hour))
	mk("recent", now.Add(-time.Hour))
	mk("quiet", now.Add(-10*24*time.Hour))
	// The quiet run's logs were last written 10 days ago.
	old := now.Add(-10 * 24 * time.Hour)
	if err := os.Chtimes(filepath.Join(logs.Root(), "quiet", "quiet-j", "step-0.log"), old, old); err != nil {
		t.Fatal(err)
	}

	cfg, _ := LoadConfig([]string{"KICI_STEP_LOG_TTL_DAYS=7"})
	cfg.Batch = 1 // several batches
	cfg.Pause = time.Millisecond
	reg := prometheus.NewRegistry()
	s := New(cfg, st, logs, "node-1", reg, nil)
	got, err := s.SweepOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got[store.SweepRuns] != 1 || got["step_logs"] != 1 {
		t.Fatalf("swept %v, want 1 run and the quiet run's logs", got)
	}
	if _, err := st.GetRun(ctx, "old"); err == nil {
		t.Error("expired run kept")
	}
	for _, id := range []string{"recent", "quiet"} {
		if _, err := st.GetRun(ctx, id); err != nil {
			t.Errorf("run %s swept: %v", id, err)
		}
	}
	exists := func(id string) bool { _, err := os.Stat(filepath.Join(logs.Root(), id)); return err == nil }
	if exists("old") || exists("quiet") || !exists("recent") {
		t.Errorf("log dirs after sweep: old=%v quiet=%v recent=%v", exists("old"), exists("quiet"), exists("recent"))
	}
	if v := swept(t, reg, store.SweepRuns); v != 1 {
		t.Errorf("kici_orch_retention_swept_total{kind=runs} = %v", v)
	}
	if v := swept(t, reg, "step_logs"); v != 1 {
		t.Errorf("kici_orch_retention_swept_total{kind=step_logs} = %v", v)
	}
	// A second sweep finds nothing.
	if got, err := s.SweepOnce(ctx); err != nil || got[store.SweepRuns] != 0 || got["step_logs"] != 0 {
		t.Fatalf("second sweep %v %v", got, err)
	}
}

// swept reads kici_orch_retention_swept_total{kind} from reg.
func swept(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kici_orch_retention_swept_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// Every node sweeps its own spawned agents' output files: a finished
// agent's file older than KICI_AGENT_LOG_TTL_DAYS goes, a recent one
// stays, and so does an old one whose agent still runs (pid file beside
// it); the metric counts the deletion.
func TestAgentLogsSweptAfterTTLUnlessRunning(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-20 * 24 * time.Hour)
	write := func(name string, mtime time.Time) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("agent output\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write("finished.log", old)
	write("running.log", old)
	write("running.pid", old)
	write("recent.log", time.Now())
	write("notes.txt", old)
	cfg, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AgentLogs != DefaultAgentLogDays*24*time.Hour {
		t.Fatalf("agent log TTL default %v", cfg.AgentLogs)
	}
	cfg.AgentLogDir = dir
	reg := prometheus.NewRegistry()
	s := New(cfg, nil, nil, "n1", reg, nil)
	s.sweepLocal()
	for name, want := range map[string]bool{"finished.log": false, "running.log": true, "running.pid": true, "recent.log": true, "notes.txt": true} {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := err == nil; got != want {
			t.Errorf("%s present=%v, want %v", name, got, want)
		}
	}
	if got := swept(t, reg, AgentLogKind); got != 1 {
		t.Errorf("kici_orch_retention_swept_total{kind=agent_logs} = %v, want 1", got)
	}
}
