package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// haWebhooks is the number of webhooks of the spread test: ~20 in `make
// test`, KICI_TEST_HA_WEBHOOKS (100 in `make test-ha`) otherwise.
func haWebhooks(t *testing.T) int {
	n := 21
	if v := os.Getenv("KICI_TEST_HA_WEBHOOKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 3 {
			t.Fatalf("KICI_TEST_HA_WEBHOOKS=%q: want a number ≥ 3", v)
		}
	}
	return n
}

// Three orchestrators on one PostgreSQL: N webhooks posted concurrently,
// round-robin across the three, make exactly N runs; every job runs once
// and succeeds, and every run's log is complete through every node.
func TestHAThreeNodesWebhooksSpreadRunOnceLogsEverywhere(t *testing.T) {
	c := startHACluster(t, 3)
	n := haWebhooks(t)
	deliveries := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for i := range deliveries {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			d, code := c.push(i%3, fmt.Sprintf("spread-%d-%d", time.Now().UnixNano(), i))
			if code != http.StatusAccepted {
				t.Errorf("webhook %d to node %d: HTTP %d, want 202", i, i%3, code)
			}
			deliveries[i] = d
		}(i)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	runs := c.settle(t, c.Nodes[1], deliveries, 4*time.Minute+time.Duration(n)*3*time.Second)
	for i, o := range c.Nodes {
		if got := workflowRuns(t, o, "hawork"); got != n {
			t.Errorf("node %d counts %d runs of hawork, want %d", i, got, n)
		}
	}
	exec := c.executions(t)
	for _, r := range runs {
		if r.status != "success" {
			t.Errorf("run %s (delivery %s) ended %s, want success", r.runID, r.delivery, r.status)
		}
		if exec[r.jobID] != 1 {
			t.Errorf("job %s of run %s executed %d times, want once", r.jobID, r.runID, exec[r.jobID])
		}
	}
	if len(exec) != n {
		t.Errorf("%d distinct jobs executed, want %d", len(exec), n)
	}
	c.checkLogsThroughEveryNode(t, runs)
	t.Logf("%d webhooks across 3 nodes → %d runs, each job executed once", n, len(runs))
}
