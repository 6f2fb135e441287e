package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// TestOrchestratorAndAgentDieTogetherJobEndsAtRestart: kill -9 of the
// orchestrator and of the agent it spawned, while a step runs; at restart on
// the same data directory the job ends failed at once, naming the lost
// agent, instead of staying running until the stale detector (two heartbeat
// intervals, 120 s by default) ends it. The step's process died with its
// agent.
func TestOrchestratorAndAgentDieTogetherJobEndsAtRestart(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: long
on: {push: {branches: [main]}}
jobs:
  long:
    steps:
      - run: |
          sh -c 'echo $$ > `+marks+`/pid; exec sleep 300'
`)
	dataDir := t.TempDir()
	port := freePort(t)
	o := startOrchestratorAt(t, dataDir, port)
	runID, agent := o.startAndFindAgent(t, repo, filepath.Join(marks, "pid"))
	o.kill9(t)
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the agent to be gone", func() bool { return !liveProcess(agent) })

	o2 := startOrchestratorAt(t, dataDir, port)
	start := time.Now()
	r := o2.waitRunStatus(t, runID, 30*time.Second, "failed", "success", "cancelled")
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("run ended %s after the restart; want at once", el)
	}
	if r.Status != "failed" {
		t.Errorf("run = %s, want failed", r.Status)
	}
	if j := o2.jobsOf(t, runID)["long"]; j.Status != "failed" || !strings.Contains(j.ErrorMessage, "ended while the orchestrator was down") {
		t.Errorf("job = %s %q, want failed naming the lost agent", j.Status, j.ErrorMessage)
	}
	assertNothingLeft(t, runID, pidsIn(t, filepath.Join(marks, "pid"))...)
}

// startAndFindAgent pushes repo, waits until its step wrote pidFile and
// returns the run id and the pid of the one agent running it.
func (o *orchestrator) startAndFindAgent(t *testing.T, repo, pidFile string) (string, int) {
	t.Helper()
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	wait.For(t, 60*time.Second, "the step to start", func() bool {
		_, err := os.Stat(pidFile)
		return err == nil
	})
	agents := o.agentPIDs()
	if len(agents) != 1 {
		t.Fatalf("agent processes = %v, want exactly 1", agents)
	}
	return runID, agents[0]
}
