package e2e

import (
	"os"
	"strings"
	"testing"
)

// A job's setup log is readable by anyone who can read the run: the
// embedded bare-metal scaler's lines there name no path of the
// orchestrator's machine (binaries, data directory, agent logs), while
// the orchestrator's own log keeps them.
func TestJobSetupLogWithholdsHostPaths(t *testing.T) {
	repo := repoWithWorkflow(t, "name: ci\non: {push: {branches: [main]}}\njobs:\n  build:\n    steps:\n      - run: echo built\n")
	o := startOrchestrator(t)
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "app", "--quiet")
	r := o.triggerAndWait(t, src)
	if r.Status != "success" {
		t.Fatalf("run %+v", r)
	}
	setup := o.logText(t, r.RunID, o.jobsOf(t, r.RunID)["build"].JobID, -1)
	if !strings.Contains(setup, "[scaler.provisioning]") || !strings.Contains(setup, "started as a process on the orchestrator's host") {
		t.Fatalf("setup log lacks the scaler lines:\n%s", setup)
	}
	for _, p := range []string{o.dataDir, binDir} {
		if strings.Contains(setup, p) {
			t.Errorf("setup log names the host path %s:\n%s", p, setup)
		}
	}
	orch, _ := os.ReadFile(o.logPath)
	if !strings.Contains(string(orch), "agent process started") || !strings.Contains(string(orch), binDir) {
		t.Errorf("the orchestrator's log lost the agent's command line")
	}
}
