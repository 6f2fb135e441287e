package runner

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// TestDriftCheck: a commit whose workflow YAML differs from the lock's
// contentHash fails the job with the drift message before any step runs;
// `drift: warn` runs it with a warning; a matching file runs normally.
func TestDriftCheck(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	locked := []byte("on: push\njobs:\n  a: {run: echo locked}\n")
	edited := []byte("on: push\njobs:\n  a: {run: echo edited}\n")
	wfPath := filepath.Join(repo, ".kici", "workflows", "ci.yaml")
	if err := os.MkdirAll(filepath.Dir(wfPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wfPath, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-qm", "edit without recompiling")
	sha := git("rev-parse", "HEAD")

	run := func(c *lockfile.DriftCheck) (*Result, *recorder) {
		job := lockfile.Job{Type: lockfile.JobStatic, Name: "a", DriftCheck: c, Steps: []lockfile.Step{{Name: "s", Run: "true"}}}
		cfg, _ := json.Marshal(job)
		rec := &recorder{}
		r := New(Options{WorkRoot: t.TempDir(), HostEnv: os.Environ()}, rec)
		return r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "j", JobName: "a",
			RepoURL: "file://" + repo, SHA: sha, JobConfig: cfg}), rec
	}
	stale := &lockfile.DriftCheck{File: ".kici/workflows/ci.yaml", ContentHash: lockfile.WorkflowContentHash(locked)}
	res, _ := run(stale)
	want := lockfile.DriftMessage(".kici/workflows/ci.yaml")
	if res.State != status.JobFailed || res.Error != want || res.Steps[0].Status != status.StepSkipped {
		t.Fatalf("stale: %s %q %+v; want failed %q", res.State, res.Error, res.Steps, want)
	}
	if !strings.Contains(want, "kici compile") || !strings.Contains(want, ".kici/workflows/ci.yaml") {
		t.Fatalf("message %q must name the file and kici compile", want)
	}

	warn := *stale
	warn.Warn = true
	res, rec := run(&warn)
	if res.State != status.JobSuccess {
		t.Fatalf("warn: %s %q", res.State, res.Error)
	}
	logged := false
	for _, m := range rec.msgs {
		if lc, ok := m.(*protocol.LogChunk); ok {
			for _, l := range lc.Lines {
				logged = logged || strings.HasPrefix(l.Text, "Warning: workflow drift:")
			}
		}
	}
	if !logged {
		t.Fatal("warn: no drift warning in the job log")
	}

	res, _ = run(&lockfile.DriftCheck{File: ".kici/workflows/ci.yaml", ContentHash: lockfile.WorkflowContentHash(edited)})
	if res.State != status.JobSuccess {
		t.Fatalf("matching: %s %q", res.State, res.Error)
	}
	// Library drift the orchestrator found is a warning of the setup log,
	// never a failure.
	lib := "library drift: library ci ref v3 now resolves to 7d2e01ab93c4; the lock has 4f0c9b2a1d7e (piece ci:p.yaml)"
	res, rec = run(&lockfile.DriftCheck{File: ".kici/workflows/ci.yaml", ContentHash: lockfile.WorkflowContentHash(edited), LibraryDrift: []string{lib}})
	if res.State != status.JobSuccess {
		t.Fatalf("library drift: %s %q, want success", res.State, res.Error)
	}
	logged = false
	for _, m := range rec.msgs {
		if lc, ok := m.(*protocol.LogChunk); ok && lc.StepIndex == protocol.JobLogStepIndex {
			for _, l := range lc.Lines {
				logged = logged || l.Text == "Warning: "+lib
			}
		}
	}
	if !logged {
		t.Fatal("library drift: no warning in the setup log")
	}
	res, _ = run(&lockfile.DriftCheck{File: "../../etc/passwd", ContentHash: "x"})
	if res.State != status.JobFailed || !strings.Contains(res.Error, "does not exist") {
		t.Fatalf("escaping path: %s %q", res.State, res.Error)
	}
}
