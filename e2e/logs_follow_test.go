package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// lockedBuffer is a bytes.Buffer safe for a process writing and the test
// reading at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogsFollowAcrossOrchestratorRestartPrintsEveryLineOnce follows a
// running step's log with `kici-admin runs logs --follow` while the
// orchestrator is killed (-9) and started again on the same database and
// address: the command reconnects instead of exiting, resumes each stream
// at the next line, and prints every line exactly once, in order, then
// exits 0 when the run is over.
func TestLogsFollowAcrossOrchestratorRestartPrintsEveryLineOnce(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: chatty
on: {push: {branches: [main]}}
jobs:
  work:
    runsOn: static-box
    steps:
      - name: talk
        run: |
          for i in $(seq 1 40); do echo "line $i"; done
          umask 0; echo started >> `+marks+`/runs
          while [ ! -f `+marks+`/gate ]; do sleep 0.1; done
          for i in $(seq 41 80); do echo "line $i"; sleep 0.02; done
`)
	dataDir, port := t.TempDir(), freePort(t)
	env := []string{"KICI_RECOVERY_WINDOW_MS=60000"}
	o := startOrchestratorAt(t, dataDir, port, env...)
	tok := mintStaticToken(t, dataDir)
	startStaticAgent(t, port, tok, "agent.log")
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	waitFileContains(t, 60*time.Second, "the step to print its first lines", filepath.Join(marks, "runs"), "started")

	var out, errs lockedBuffer
	cmd := exec.Command(filepath.Join(binDir, "kici-admin"), "--url", o.url, "--token", o.token,
		"runs", "logs", runID, "--follow", "--raw", "--step", "0", "--interval", "100ms")
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	wait.For(t, 30*time.Second, "the follower to print line 40", func() bool { return strings.Contains(out.String(), "line 40\n") })

	o.kill9(t)
	write(t, filepath.Join(marks, "gate"), "")
	wait.Elapse(t.Context(), 1500*time.Millisecond) // the step writes on while no orchestrator listens
	select {
	case err := <-exited:
		t.Fatalf("kici-admin exited while the orchestrator was down: %v\n%s", err, errs.String())
	default:
	}
	o2 := startOrchestratorAt(t, dataDir, port, env...)

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("kici-admin runs logs --follow: %v\nstderr: %s", err, errs.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("follow did not end after the run; output so far:\n%s\nstderr: %s", out.String(), errs.String())
	}
	var want []string
	for i := 1; i <= 80; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	if got := strings.TrimSpace(out.String()); got != strings.Join(want, "\n") {
		t.Fatalf("followed lines (want line 1..80, each once, in order):\n%s", got)
	}
	if !strings.Contains(errs.String(), "reconnecting") {
		t.Errorf("no reconnect notice on stderr: %q", errs.String())
	}
	if r := o2.waitRunStatus(t, runID, 30*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Errorf("run = %s (%s)", r.Status, r.FailureReason)
	}
}
