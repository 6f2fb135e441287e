package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// drainRollRounds is how many times the rolling SIGTERM restart goes
// round the three nodes: once in make test, more under make test-ha
// (drain_stop_ha_test.go).
var drainRollRounds = 1

// gatedWorkflow's job marks its start, then waits for the gate file of its
// run (marks/gate-<run id>), so a test decides when each job ends. Each
// job runs as a uid of its own, so the marks file it may create is left
// writable for the next job (umask 0).
func gatedWorkflow(marks string) string {
	return `name: gated
on: {push: {branches: [main]}}
jobs:
  hold:
    steps:
      - run: |
          umask 0
          echo "start $KICI_RUN_ID" >> ` + marks + `/runs
          while [ ! -f ` + marks + `/gate-$KICI_RUN_ID ]; do sleep 0.1; done
          echo "done $KICI_RUN_ID"
`
}

// sigterm sends SIGTERM to o and returns a channel closed once it exited.
func sigterm(t *testing.T, o *orchestrator) <-chan struct{} {
	t.Helper()
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = o.cmd.Wait(); close(done) }()
	return done
}

// drainRuns pushes n runs of repo through o and waits until each job has
// started; it returns the run ids.
func drainRuns(t *testing.T, o *orchestrator, repo, source, marks string, n int) []string {
	t.Helper()
	var runs []string
	for i := 0; i < n; i++ {
		_, delivery := o.push(t, repo, source)
		runs = append(runs, o.runOf(t, delivery))
	}
	for _, r := range runs {
		waitFileContains(t, 90*time.Second, "job of run "+r+" to start", filepath.Join(marks, "runs"), "start "+r)
	}
	return runs
}

// openGates lets the jobs of runs finish.
func openGates(t *testing.T, marks string, runs []string) {
	t.Helper()
	for _, r := range runs {
		write(t, filepath.Join(marks, "gate-"+r), "")
	}
}

// allSucceeded fails the test for every run that did not end success
// (a cancelled one names its reason).
func allSucceeded(t *testing.T, via *orchestrator, runs []string) {
	t.Helper()
	for _, r := range runs {
		if got := via.waitRunStatus(t, r, 2*time.Minute, "success", "failed", "cancelled"); got.Status != "success" {
			t.Errorf("run %s ended %s: %s", r, got.Status, via.jobsOf(t, r)["hold"].ErrorMessage)
		}
	}
}

// drainStatus is `kici-admin orchestrator drain [--node id] [--status]
// --json` through o.
func drainStatus(t *testing.T, o *orchestrator, args ...string) apitypes.ClusterDrainStatus {
	t.Helper()
	var st apitypes.ClusterDrainStatus
	out := o.admin(t, append([]string{"orchestrator", "drain", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("drain answer %q: %v", out, err)
	}
	return st
}

func nodeRow(st apitypes.ClusterDrainStatus, id string) apitypes.ClusterNodeStatus {
	for _, n := range st.Nodes {
		if n.ID == id {
			return n
		}
	}
	return apitypes.ClusterNodeStatus{}
}

// A drain of node 3 set through node 1 is the cluster's state at once:
// node 1's status shows node 3 draining with its own running jobs, node 3
// itself says it drains; stopping node 3 then (SIGTERM) waits for its
// spawned agents' jobs, which end success: nothing is cancelled.
func TestHADrainThroughAnotherNodeThenStopCancelsNothing(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, gatedWorkflow(marks))
	c := startClusterHarness(t, 3, "KICI_SHUTDOWN_GRACE_MS=90000")
	n1, n3 := c.Nodes[0], c.Nodes[2]
	source := addLocalSource(t, n3, repo)
	runs := drainRuns(t, n3, repo, source, marks, 2)
	n3ID := strings.TrimSpace(readFile(t, filepath.Join(n3.dataDir, "node-id")))

	drainStatus(t, n1, "--node", n3ID)
	st := drainStatus(t, n1, "--status")
	if row := nodeRow(st, n3ID); !row.Draining || !row.Alive || row.JobsRunning != 2 {
		t.Errorf("through node 1, node 3 = %+v; want alive, draining, 2 jobs running", row)
	}
	if st.Cluster == nil || st.Cluster.JobsRunning != 2 || st.Cluster.Draining {
		t.Errorf("through node 1, cluster = %+v; want not draining (2 of 3 nodes accept), 2 running", st.Cluster)
	}
	if own := drainStatus(t, n3, "--status"); !own.Draining || own.JobsRunning != 2 || !nodeRow(own, n3ID).Draining {
		t.Errorf("node 3's own answer: draining %v, %d running, row %+v; want draining with 2 running", own.Draining, own.JobsRunning, nodeRow(own, n3ID))
	}
	waitLog(t, n3, "orchestrator draining")

	exited := sigterm(t, n3)
	waitLog(t, n3, "stopping: draining first")
	select {
	case <-exited:
		t.Fatal("node 3 stopped before its running jobs finished")
	default:
	}
	openGates(t, marks, runs)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("node 3 did not stop within 60 s of its jobs finishing")
	}
	allSucceeded(t, n1, runs)
	if log := readFile(t, n3.logPath); !strings.Contains(log, "stopping: drained, no job running") {
		t.Errorf("node 3 did not log the completed drain:\n%s", log)
	}
}

// A rolling SIGTERM restart of three nodes while each has jobs running on
// agents it spawned, and the next node takes new runs meanwhile: every run
// ends success, none is cancelled ("agent shutting down").
func TestHARollingSIGTERMRestartUnderLoadCancelsNothing(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, gatedWorkflow(marks))
	c := startClusterHarness(t, 3, "KICI_SHUTDOWN_GRACE_MS=90000")
	source := addLocalSource(t, c.Nodes[0], repo)
	var all []string
	for round := 0; round < drainRollRounds; round++ {
		for i := range c.Nodes {
			next := c.Nodes[(i+1)%len(c.Nodes)]
			stopping := drainRuns(t, c.Nodes[i], repo, source, marks, 2)
			elsewhere := drainRuns(t, next, repo, source, marks, 1)
			exited := sigterm(t, c.Nodes[i])
			waitLog(t, c.Nodes[i], "stopping: draining first")
			// Load while the node drains: a new run through the next node.
			during := drainRuns(t, next, repo, source, marks, 1)
			openGates(t, marks, append(append(stopping, elsewhere...), during...))
			select {
			case <-exited:
			case <-time.After(60 * time.Second):
				t.Fatalf("node %d did not stop within 60 s of its jobs finishing", i)
			}
			c.Start(t, i)
			all = append(append(append(all, stopping...), elsewhere...), during...)
		}
	}
	allSucceeded(t, c.Nodes[0], all)
	t.Logf("rolling SIGTERM restart: %d round(s), %d runs", drainRollRounds, len(all))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// addLocalSource registers repo as a local source through o (triggering
// nothing) and returns its id.
func addLocalSource(t *testing.T, o *orchestrator, repo string) string {
	t.Helper()
	return o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "gated", "--quiet")
}
