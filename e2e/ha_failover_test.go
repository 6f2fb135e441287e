package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// kill -9 of the node an agent is connected to, mid-step: the agent
// reconnects to the other node (KICI_ORCHESTRATOR_URL lists both), replays
// what it had not seen acknowledged, and the job ends success with every
// log line exactly once. How long after the kill the run ended is logged
// (docs/high-availability.md quotes it); it is not asserted.
func TestClusterAgentFailsOverWhenItsNodeIsKilled(t *testing.T) {
	const first, total = 2000, 20000
	c := startClusterHarness(t, 2, "KICI_RECOVERY_WINDOW_MS=60000")
	b := c.Nodes[1]
	marks := marksDir(t)
	repo := repoWithWorkflow(t, gatedPrinterWorkflow(marks, first, total))
	agent := c.StartStaticAgent(t, "static-f", c.MintStaticToken(t), c.WSURLs(0))
	wait.For(t, 30*time.Second, "the agent to register with node A", func() bool {
		return logHasLine(c.NodeLog(t, 0), `msg="agent registered"`, "agent=static-f")
	})
	_, delivery := b.push(t, repo, "")
	runID := b.runOf(t, delivery)
	waitFileContains(t, 60*time.Second, "the step to print its first lines", filepath.Join(marks, "runs"), "started")

	c.Kill9(t, 0)
	killed := time.Now()
	write(t, filepath.Join(marks, "gate"), "") // the step prints the rest while the agent moves
	r := b.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	ended := time.Since(killed)
	if r.Status != "success" {
		t.Fatalf("run after node A's kill -9 = %s (%s)", r.Status, r.FailureReason)
	}
	t.Logf("run ended success %.1f s after the kill -9 of the agent's node", ended.Seconds())
	if !logHasLine(c.NodeLog(t, 1), `msg="agent registered"`, "agent=static-f") {
		t.Fatalf("the agent never registered with node B; agent log:\n%s", agent.Log())
	}
	job := b.jobsOf(t, runID)["print"]
	if job.Status != "success" {
		t.Fatalf("job = %s (%s)", job.Status, job.ErrorMessage)
	}
	got := b.readLog(t, runID, job.JobID, 0)
	if err := checkSequence(got, total, func(i int) string { return fmt.Sprintf("line %d", i+1) }); err != nil {
		t.Fatalf("log after failover: %v", err)
	}
}

// A cancel through node B reaches the agent connected to node A: node B
// asks over the cluster bus, node A writes job.cancel, the agent stops the
// step and reports the job cancelled (not ended by B for want of an agent).
func TestClusterCancelThroughNodeBReachesAgentOnNodeA(t *testing.T) {
	c := startClusterHarness(t, 2)
	a, b := c.Nodes[0], c.Nodes[1]
	marks := marksDir(t)
	repo := repoWithWorkflow(t, gatedPrinterWorkflow(marks, 10, 20)) // the gate never opens
	c.StartStaticAgent(t, "static-c", c.MintStaticToken(t), c.WSURL(0))
	_, delivery := a.push(t, repo, "")
	runID := a.runOf(t, delivery)
	waitFileContains(t, 60*time.Second, "the step to start", filepath.Join(marks, "runs"), "started")

	b.admin(t, "runs", "cancel", runID)
	r := b.waitRunStatus(t, runID, time.Minute, "success", "failed", "cancelled")
	if r.Status != "cancelled" {
		t.Fatalf("run after a cancel through node B = %s (%s)", r.Status, r.FailureReason)
	}
	job := b.jobsOf(t, runID)["print"]
	if job.Status != "cancelled" || strings.Contains(job.ErrorMessage, "no connected agent") {
		t.Fatalf("job = %s (%s), want cancelled by its agent", job.Status, job.ErrorMessage)
	}
	if !logHasLine(c.NodeLog(t, 0), `msg="job cancel sent for another node"`, "job="+job.JobID) {
		t.Fatalf("node A did not forward the cancel to its agent; node A log:\n%s", c.NodeLog(t, 0))
	}
}

// A job enqueued on node A is dispatched by node B, which holds the only
// fitting idle agent, on the wake-up node A sends when it enqueues (not at
// node B's next queue resync): node B logs the dispatch as made on that
// wake-up.
func TestClusterJobEnqueuedOnNodeADispatchedByNodeBOnWakeUp(t *testing.T) {
	c := startClusterHarness(t, 2)
	a := c.Nodes[0]
	marks := marksDir(t)
	repo := repoWithWorkflow(t, gatedPrinterWorkflow(marks, 3, 3))
	write(t, filepath.Join(marks, "gate"), "")
	c.StartStaticAgent(t, "static-w", c.MintStaticToken(t), c.WSURL(1))
	wait.For(t, 30*time.Second, "the agent to register with node B", func() bool {
		return logHasLine(c.NodeLog(t, 1), `msg="agent registered"`, "agent=static-w")
	})
	_, delivery := a.push(t, repo, "")
	runID := a.runOf(t, delivery)
	if r := a.waitRunStatus(t, runID, time.Minute, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run = %s (%s)", r.Status, r.FailureReason)
	}
	job := a.jobsOf(t, runID)["print"]
	if !logHasLine(c.NodeLog(t, 1), `msg="job dispatched on a wake-up from another node"`, "job="+job.JobID) {
		t.Fatalf("node B did not dispatch job %s on a wake-up; node B log:\n%s", job.JobID, c.NodeLog(t, 1))
	}
}

// A second connection for an agent id that is live on node A, made to node
// B with the same static token but without the session's resume token, is
// refused by node B: agent sessions are shared by the nodes, so the rule a
// single node enforces holds across the cluster.
func TestClusterSecondConnectionForAgentLiveOnAnotherNodeIsRefused(t *testing.T) {
	c := startClusterHarness(t, 2)
	tok := c.MintStaticToken(t)
	c.StartStaticAgent(t, "static-s", tok, c.WSURL(0))
	wait.For(t, 30*time.Second, "the agent to register with node A", func() bool {
		return logHasLine(c.NodeLog(t, 0), `msg="agent registered"`, "agent=static-s")
	})
	c.StartStaticAgent(t, "static-s", tok, c.WSURL(1)) // a second holder of the token
	wait.For(t, 30*time.Second, "node B to refuse the second connection", func() bool {
		return logHasLine(c.NodeLog(t, 1), "refusing a connection for an agent id live on another node", "agent=static-s")
	})
	if logHasLine(c.NodeLog(t, 1), `msg="agent registered"`, "agent=static-s") {
		t.Fatalf("node B registered a second connection for an agent live on node A; node B log:\n%s", c.NodeLog(t, 1))
	}
}

// An agent a node spawns for a job is given every live node's URL, its
// own node's first, so it can fail over: once node A has heartbeaten after
// node B joined, the agent it spawns has KICI_ORCHESTRATOR_URL=A,B.
func TestClusterSpawnedAgentGetsEveryNodeURL(t *testing.T) {
	c := startClusterHarness(t, 2)
	a := c.Nodes[0]
	var nodes struct {
		Self  string `json:"self"`
		Nodes []struct {
			ID              string    `json:"id"`
			LastHeartbeatAt time.Time `json:"lastHeartbeatAt"`
		} `json:"nodes"`
	}
	wait.For(t, 30*time.Second, "both nodes in the registry", func() bool {
		a.get(t, "/api/v1/admin/cluster/nodes", &nodes)
		return len(nodes.Nodes) == 2
	})
	bothListed := time.Now()
	wait.For(t, 30*time.Second, "node A to heartbeat after node B joined", func() bool {
		a.get(t, "/api/v1/admin/cluster/nodes", &nodes)
		for _, n := range nodes.Nodes {
			if n.ID == nodes.Self && n.LastHeartbeatAt.After(bothListed) {
				return true
			}
		}
		return false
	})
	marks := marksDir(t)
	repo := repoWithWorkflow(t, strings.Replace(gatedPrinterWorkflow(marks, 1, 1), "    runsOn: static-box\n", "", 1))
	_, delivery := a.push(t, repo, "")
	runID := a.runOf(t, delivery)
	waitFileContains(t, 60*time.Second, "the step on a spawned agent", filepath.Join(marks, "runs"), "started")
	want := "KICI_ORCHESTRATOR_URL=" + c.WSURL(0) + "," + c.WSURL(1)
	if got := agentProcesses(want); len(got) == 0 {
		t.Fatalf("no spawned agent runs with %s", want)
	}
	write(t, filepath.Join(marks, "gate"), "")
	if r := a.waitRunStatus(t, runID, time.Minute, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run = %s (%s)", r.Status, r.FailureReason)
	}
}
