package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// TestUntrustedJobRefusedWhenStepsUnconfined: with RefuseUntrusted set (the
// agent cannot keep steps from its host), a job marked untrusted fails
// before any step runs, with the reason; a trusted job runs.
func TestUntrustedJobRefusedWhenStepsUnconfined(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	no := false
	cfg, _ := json.Marshal(lockfile.Job{Name: "j", Checkout: &no, Steps: []lockfile.Step{{Name: "s", Run: "touch " + marker}}})
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: []string{"PATH=" + os.Getenv("PATH")},
		RefuseUntrusted: "steps run as the agent's own user"}, &recorder{})

	res := r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "fork", JobConfig: cfg, Untrusted: true})
	if res.State != status.JobFailed || !strings.Contains(res.Error, "refusing an untrusted job") || !strings.Contains(res.Error, "own user") {
		t.Fatalf("untrusted job: %s %q", res.State, res.Error)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the untrusted job's step ran")
	}
	res = r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "own", JobConfig: cfg})
	if res.State != status.JobSuccess {
		t.Fatalf("trusted job: %s %q", res.State, res.Error)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the trusted job's step did not run")
	}
}
