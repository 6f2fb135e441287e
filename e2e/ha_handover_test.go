package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// handoverRounds is how many times the handover restart goes round the
// nodes: once in make test, more under make test-ha (ha_handover_ha_test.go).
var handoverRounds = 1

// waitBeatAfter waits until node i of c has heartbeaten after since: the
// agents it spawns from then on carry every node registered before.
func waitBeatAfter(t *testing.T, c *clusterHarness, i int, since time.Time) {
	t.Helper()
	var nodes struct {
		Self  string `json:"self"`
		Nodes []struct {
			ID              string    `json:"id"`
			LastHeartbeatAt time.Time `json:"lastHeartbeatAt"`
		} `json:"nodes"`
	}
	wait.For(t, 30*time.Second, "node "+strconv.Itoa(i)+" to heartbeat with every node registered", func() bool {
		c.Nodes[i].get(t, "/api/v1/admin/cluster/nodes", &nodes)
		for _, n := range nodes.Nodes {
			if n.ID == nodes.Self && n.LastHeartbeatAt.After(since) {
				return true
			}
		}
		return false
	})
}

// agentPids reads the pid files the bare-metal scaler of a node keeps
// under <data>/agents for the agents it runs.
func agentPids(t *testing.T, dataDir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, "agents", "*.pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.Fields(string(b) + " 0")[0]); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processGone reports whether pid has exited (no such process, or a
// zombie waiting for init to reap it).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// A rolling SIGTERM restart of two nodes with a drain grace far shorter
// than the jobs: each stopping node's spawned agents, still running their
// jobs when the grace ends, are handed over instead of cancelled. They
// reconnect to the other node, finish there, and exit by themselves: every
// run ends success, no job is cancelled, every job's log is readable in
// full through the surviving node, and no agent process is left.
func TestHAHandoverSpawnedAgentsSurviveTheirNodeStop(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, gatedWorkflow(marks))
	c := startClusterHarness(t, 2, "KICI_SHUTDOWN_GRACE_MS=300")
	source := addLocalSource(t, c.Nodes[0], repo)
	started := time.Now()
	var all []string
	for round := 0; round < handoverRounds; round++ {
		for _, i := range []int{1, 0} {
			other := 1 - i
			waitBeatAfter(t, c, i, started)
			runs := drainRuns(t, c.Nodes[i], repo, source, marks, 2)
			want := "KICI_ORCHESTRATOR_URL=" + c.WSURL(i) + "," + c.WSURL(other)
			if got := agentProcesses(want); len(got) != len(runs) {
				t.Fatalf("%d agents run with %s, want %d (one per job)", len(got), want, len(runs))
			}
			pids := agentPids(t, c.dirs[i])
			stopAt := time.Now()
			exited := sigterm(t, c.Nodes[i])
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("node %d did not stop within 30 s of SIGTERM with a 300 ms grace", i)
			}
			t.Logf("node %d stopped %s after SIGTERM with %d jobs running", i, time.Since(stopAt).Round(time.Millisecond), len(runs))
			if log := readFile(t, c.Nodes[i].logPath); !strings.Contains(log, "handed over to the other nodes") {
				t.Fatalf("node %d did not hand its agents over; its log:\n%s", i, log)
			}
			for _, pid := range pids {
				if processGone(pid) {
					t.Errorf("spawned agent pid %d died with its node", pid)
				}
			}
			// Every job still runs, now through the other node.
			for _, r := range runs {
				if j := c.Nodes[other].jobsOf(t, r)["hold"]; j.Status != "running" {
					t.Errorf("run %s: job %s (%s) after its node stopped; want running", r, j.Status, j.ErrorMessage)
				}
			}
			openGates(t, marks, runs)
			allSucceeded(t, c.Nodes[other], runs)
			for _, r := range runs {
				j := c.Nodes[other].jobsOf(t, r)["hold"]
				if log := c.Nodes[other].logText(t, r, j.JobID, 0); !strings.Contains(log, "done "+r) {
					t.Errorf("run %s: job log through the surviving node lacks its last line %q:\n%s", r, "done "+r, log)
				}
			}
			wait.For(t, 30*time.Second, "the handed-over agents to exit after their job", func() bool {
				for _, pid := range pids {
					if !processGone(pid) {
						return false
					}
				}
				return true
			})
			c.Start(t, i)
			all = append(all, runs...)
		}
	}
	t.Logf("handover restart: %d round(s), %d runs, all success", handoverRounds, len(all))
}
