package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// containerHandoverWorkflow's job runs in an agent container for a few
// seconds, far longer than the stopping node's drain grace.
const containerHandoverWorkflow = `name: ho
on: {push: {branches: [main]}}
jobs:
  hold:
    runsOn: ctr
    checkout: false
    steps:
      - shell: sh
        run: |
          echo "start $KICI_RUN_ID"
          sleep 8
          echo "done $KICI_RUN_ID"
`

// A node stopped (SIGTERM) while an agent container it spawned runs a job
// hands the container over instead of stopping it: the container is
// renamed <agent id>-handed-over and keeps running, its agent reconnects to
// the other node, the job ends success with its full log there, and the
// stopped node's restart removes the exited container (nothing leaks).
func TestHAHandoverContainerAgentFinishesOnAnotherNode(t *testing.T) {
	cli, name := containerScalerName(t, "e2e-ho")
	repo := makeWorkflowRepo(t, containerHandoverWorkflow)
	c := &clusterHarness{DatabaseURL: pgtest.URL(t)}
	c.env = []string{"KICI_DATABASE_URL=" + c.DatabaseURL, "KICI_SECRET_KEY=" + haSecretKey,
		"KICI_HOST=172.30.0.1", "KICI_SHUTDOWN_GRACE_MS=300"}
	// Each node its own scaler name: on one Docker engine a node removes
	// the containers of its scaler name that it does not track.
	cfgs := []string{containerScalerConfig(t, name, ""), containerScalerConfig(t, name+"-b", "")}
	t.Cleanup(func() {
		for _, id := range scalerContainers(t, cli, name+"-b") {
			_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
	})
	start := func(i int) {
		c.Nodes[i] = startOrchestratorAt(t, c.dirs[i], c.ports[i], append(c.env, "KICI_SCALER_CONFIG_PATH="+cfgs[i])...)
	}
	for i := 0; i < 2; i++ {
		c.dirs = append(c.dirs, t.TempDir())
		c.ports = append(c.ports, freePort(t))
		c.Nodes = append(c.Nodes, nil)
		start(i)
	}
	began := time.Now()
	waitBeatAfter(t, c, 0, began)
	source := addLocalSource(t, c.Nodes[0], repo)
	_, delivery := c.Nodes[0].push(t, repo, source)
	runID := c.Nodes[0].runOf(t, delivery)
	wait.For(t, 90*time.Second, "the job to run in an agent container of node 0", func() bool {
		return c.Nodes[0].jobsOf(t, runID)["hold"].Status == "running" && len(scalerContainers(t, cli, name)) == 1
	})
	exited := sigterm(t, c.Nodes[0])
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("node 0 did not stop within 30 s of SIGTERM with a 300 ms grace")
	}
	ids := scalerContainers(t, cli, name)
	if len(ids) != 1 {
		t.Fatalf("%d containers of node 0's scaler after it stopped, want the 1 handed over", len(ids))
	}
	in, err := cli.ContainerInspect(context.Background(), ids[0], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !in.Container.State.Running || !strings.HasSuffix(in.Container.Name, "-handed-over") {
		t.Fatalf("container after its node stopped: name %s, running %v; want running, renamed …-handed-over", in.Container.Name, in.Container.State.Running)
	}
	r := c.Nodes[1].waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled")
	j := c.Nodes[1].jobsOf(t, runID)["hold"]
	if r.Status != "success" {
		t.Fatalf("run ended %s (%s), want success", r.Status, j.ErrorMessage)
	}
	if log := c.Nodes[1].logText(t, runID, j.JobID, 0); !strings.Contains(log, "start "+runID) || !strings.Contains(log, "done "+runID) {
		t.Errorf("job log through node 1 is not complete:\n%s", log)
	}
	wait.For(t, 30*time.Second, "the handed-over container to exit after its job", func() bool {
		in, err := cli.ContainerInspect(context.Background(), ids[0], client.ContainerInspectOptions{})
		return err != nil || !in.Container.State.Running
	})
	start(0)
	wait.For(t, 30*time.Second, "node 0's restart to remove the exited container", func() bool {
		return len(scalerContainers(t, cli, name)) == 0
	})
}
