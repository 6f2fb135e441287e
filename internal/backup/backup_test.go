package backup

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

// finished records the jobs EndInFlight ends.
type finished struct{ ids []string }

func (f *finished) JobFinished(_ context.Context, jobID string, st status.Job, errMsg string, _ time.Time) error {
	if st != status.JobFailed || errMsg != InFlightReason {
		return &os.PathError{Op: "unexpected end " + string(st), Path: errMsg}
	}
	f.ids = append(f.ids, jobID)
	return nil
}

func noEnv(string) string { return "" }

// dataDirWithRun makes a data directory whose database holds one run with
// a queued, a running and a finished job, and a master key file.
func dataDirWithRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), config.DatabaseFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run := &store.Run{ID: "r1", WorkflowName: "ci", Status: status.RunRunning, Provider: provider.Local, RepoIdentifier: "org/repo",
		Ref: "refs/heads/main", SHA: strings.Repeat("a", 40), DeliveryID: "d1", OrgID: "org", CreatedAt: time.Now().UTC()}
	var jobs []*store.Job
	for id, s := range map[string]status.Job{"queued": status.JobQueued, "running": status.JobRunning, "done": status.JobSuccess} {
		jobs = append(jobs, &store.Job{ID: id, JobName: id, BaseJobName: id, Status: s})
	}
	if err := st.CreateRun(t.Context(), run, jobs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.key"), []byte("key material\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBackupCopiesDatabaseAndKeyAndRestoreEndsInFlightJobsOnce(t *testing.T) {
	dir := dataDirWithRun(t)
	out := filepath.Join(t.TempDir(), "kici-backup.db")
	res, err := Backup(t.Context(), dir, out, true, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if res.File != out || res.KeyFile != out+".secret.key" || res.BackupID == "" {
		t.Fatalf("result = %+v", res)
	}
	fi, err := os.Stat(res.KeyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key copy: %v, mode %v; want 0600", err, fi)
	}
	if b, _ := os.ReadFile(res.KeyFile); string(b) != "key material\n" {
		t.Fatalf("key copy holds %q", b)
	}
	if _, err := Backup(t.Context(), dir, out, true, noEnv); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second backup to the same place: %v, want a refusal", err)
	}

	if r, err := DetectMarker(t.Context(), config.DatabaseFile(dir)); err != nil || r != nil {
		t.Fatalf("the live database reads as a restored backup: %v, %v", r, err)
	}
	r, err := DetectMarker(t.Context(), out)
	if err != nil || r == nil {
		t.Fatalf("the copy carries no restore marker: %v, %v", r, err)
	}
	st, err := sqlite.Open(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ended finished
	if err := r.EndInFlight(t.Context(), st, &ended, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ended.ids)
	if !slices.Equal(ended.ids, []string{"queued", "running"}) {
		t.Fatalf("ended %v, want the queued and the running job only", ended.ids)
	}
	if again, err := DetectMarker(t.Context(), out); err != nil || again != nil {
		t.Fatalf("after the safe start the copy still reads as restored: %v, %v", again, err)
	}
}

func TestBackupWithKeyRefusesAnInlineKeyAndWritesNothing(t *testing.T) {
	dir := dataDirWithRun(t)
	out := filepath.Join(t.TempDir(), "b.db")
	env := func(k string) string {
		if k == "KICI_SECRET_KEY" {
			return "inline"
		}
		return ""
	}
	if _, err := Backup(t.Context(), dir, out, true, env); err == nil || !strings.Contains(err.Error(), "KICI_SECRET_KEY") {
		t.Fatalf("Backup = %v, want the inline key refused", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused backup wrote %s (%v)", out, err)
	}
}
