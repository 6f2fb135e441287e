package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// gatedPrinterWorkflow prints lines 1..first, marks "started" in marks,
// waits for marks/gate, then prints lines first+1..total (on the static
// agent).
func gatedPrinterWorkflow(marks string, first, total int) string {
	return fmt.Sprintf(`name: printer
on: {push: {branches: [main]}}
jobs:
  print:
    runsOn: static-box
    steps:
      - name: print
        run: |
          seq 1 %d | sed 's/^/line /'
          umask 0; echo started >> %s/runs
          while [ ! -f %s/gate ]; do sleep 0.1; done
          i=%d
          while [ $i -lt %d ]; do
            seq $((i+1)) $((i+500)) | sed 's/^/line /'
            i=$((i+500))
            sleep 0.05
          done
`, first, marks, marks, first, total)
}

func lineList(n int) string {
	var w []string
	for i := 1; i <= n; i++ {
		w = append(w, fmt.Sprintf("line %d", i))
	}
	return strings.Join(w, "\n")
}

// Two orchestrators on one PostgreSQL: a job dispatched by node A (its
// only agent is connected to A) is read completely through node B, both
// page by page through the API and followed live with `kici-admin runs
// logs --follow` through B while the step still prints.
func TestClusterLogsOfJobOnNodeAReadThroughNodeB(t *testing.T) {
	const first, total = 1000, 6000
	c := startClusterHarness(t, 2)
	a, b := c.Nodes[0], c.Nodes[1]
	marks := marksDir(t)
	repo := repoWithWorkflow(t, gatedPrinterWorkflow(marks, first, total))
	c.StartStaticAgent(t, "static-a", c.MintStaticToken(t), c.WSURL(0))
	_, delivery := a.push(t, repo, "")
	runID := b.runOf(t, delivery)
	waitFileContains(t, 60*time.Second, "the step to print its first lines", filepath.Join(marks, "runs"), "started")

	var out, errs lockedBuffer
	follow := exec.Command(filepath.Join(binDir, "kici-admin"), "--url", b.url, "--token", b.token,
		"runs", "logs", runID, "--follow", "--raw", "--step", "0", "--interval", "100ms")
	follow.Env = cleanEnv()
	follow.Stdout, follow.Stderr = &out, &errs
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- follow.Wait() }()
	t.Cleanup(func() {
		if follow.ProcessState == nil {
			_ = follow.Process.Kill()
			<-exited
		}
	})
	wait.For(t, 30*time.Second, "the follower on node B to print the lines node A stored",
		func() bool { return strings.Contains(out.String(), fmt.Sprintf("line %d\n", first)) })
	write(t, filepath.Join(marks, "gate"), "")

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("kici-admin runs logs --follow through node B: %v\nstderr: %s", err, errs.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("follow through node B did not end after the run; stderr: %s", errs.String())
	}
	if got := strings.TrimSpace(out.String()); got != lineList(total) {
		t.Fatalf("followed through node B: %d lines, want line 1..%d each once in order", strings.Count(got, "\n")+1, total)
	}
	if r := b.waitRunStatus(t, runID, 30*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run = %s (%s)", r.Status, r.FailureReason)
	}
	job := b.jobsOf(t, runID)["print"]
	if got := strings.Join(b.readLog(t, runID, job.JobID, 0), "\n"); got != lineList(total) {
		t.Fatalf("log read through node B's API is not line 1..%d each once", total)
	}
	if !logHasLine(c.NodeLog(t, 0), `msg="job dispatched"`, "job="+job.JobID) {
		t.Fatalf("node A did not dispatch job %s; node A log:\n%s", job.JobID, c.NodeLog(t, 0))
	}
}
