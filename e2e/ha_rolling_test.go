package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// webhookStream posts a push every interval to the nodes that are up, in
// turn, and keeps the deliveries a node accepted (202). A node being
// restarted is marked down first, so the stream never counts a refusal of
// a stopping node as a loss: only accepted deliveries must make runs.
type webhookStream struct {
	c        *haCluster
	mu       sync.Mutex
	down     map[int]bool
	accepted []string
	refused  int
	stop     chan struct{}
	done     chan struct{}
}

func (c *haCluster) startStream(interval time.Duration) *webhookStream {
	s := &webhookStream{c: c, down: map[int]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for k := 0; ; k++ {
			select {
			case <-s.stop:
				return
			case <-time.After(interval):
			}
			s.mu.Lock()
			node := k % len(c.Nodes)
			for s.down[node] {
				k++
				node = k % len(c.Nodes)
			}
			s.mu.Unlock()
			d, code := c.push(node, fmt.Sprintf("stream-%d-%d", time.Now().UnixNano(), k))
			s.mu.Lock()
			if code == http.StatusAccepted {
				s.accepted = append(s.accepted, d)
			} else {
				s.refused++
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// setDown marks node i down (or up) for the stream.
func (s *webhookStream) setDown(i int, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[i] = down
}

// finish stops the stream and returns the accepted deliveries.
func (s *webhookStream) finish() []string {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.accepted...)
}

// waitNextInstant waits for one more schedule instant than fired so far.
func waitNextInstant(t *testing.T, o *orchestrator) {
	t.Helper()
	before, _ := scheduleInstants(t, o)
	waitInstants(t, o, len(before)+1)
}

// checkDeliveries waits for one terminal run per accepted delivery (read
// through node via; counted through node count) and checks that no job
// executed twice and every successful job once. Cancelled runs are
// allowed with allowCancelled (a node stopped with SIGTERM cancels the
// jobs of the agents it spawned); otherwise every run must succeed. It
// returns the runs and how many ended in each status.
func (c *haCluster) checkDeliveries(t *testing.T, via, count *orchestrator, deliveries []string, timeout time.Duration, allowCancelled bool) ([]haRun, map[string]int) {
	t.Helper()
	runs := c.settle(t, via, deliveries, timeout)
	if got := workflowRuns(t, count, "hawork"); got != len(deliveries) {
		t.Errorf("%d runs of hawork for %d accepted deliveries", got, len(deliveries))
	}
	exec := c.executions(t)
	statuses := map[string]int{}
	for _, r := range runs {
		statuses[r.status]++
		switch {
		case r.status == "success" && exec[r.jobID] != 1:
			t.Errorf("successful job %s of run %s executed %d times, want once", r.jobID, r.runID, exec[r.jobID])
		case exec[r.jobID] > 1:
			t.Errorf("job %s of run %s (%s) executed %d times", r.jobID, r.runID, r.status, exec[r.jobID])
		case r.status == "success":
		case r.status == "cancelled" && allowCancelled:
		default:
			t.Errorf("run %s ended %s: %s", r.runID, r.status, via.jobsOf(t, r.runID)["work"].ErrorMessage)
		}
	}
	return runs, statuses
}

// checkInstants fails the test unless the schedule's instants (unix
// seconds, sorted) step by exactly period with none missed or doubled.
// It reports whether they did.
func checkInstants(t *testing.T, got []int64, missed int, period int64) bool {
	t.Helper()
	ok := missed == 0
	for i := 1; i < len(got); i++ {
		if got[i]-got[i-1] != period {
			t.Errorf("schedule instants %v: want one every %d s (gap or duplicate at %d)", got, period, i)
			ok = false
			break
		}
	}
	if missed != 0 {
		t.Errorf("%d schedule instants recorded missed, want none", missed)
	}
	return ok
}

// logScheduleEvents logs every schedule entry of the event log (any
// status), to show what became of an instant that did not fire.
func logScheduleEvents(t *testing.T, o *orchestrator) {
	t.Helper()
	var page struct {
		Deliveries []map[string]any `json:"deliveries"`
	}
	o.get(t, "/api/v1/admin/event-log?event=schedule&limit=200", &page)
	for _, d := range page.Deliveries {
		t.Logf("event log: %v %v %v %v", d["deliveryId"], d["status"], d["receivedAt"], d["errorMessage"])
	}
}

// Rolling restart of all three nodes (SIGTERM, one at a time, each down
// across a schedule instant) under a steady stream of webhooks and an
// @every 5s schedule: every accepted delivery makes exactly one run, no job
// executes twice, every successful run's log is complete through every
// node, and every instant of the schedule fires exactly once.
func TestHARollingRestartLosesNoDeliveryOrInstant(t *testing.T) {
	c := startHACluster(t, 3)
	// The first push to the default branch registers the schedule.
	first, code := c.push(0, fmt.Sprintf("rolling-first-%d", time.Now().UnixNano()))
	if code != http.StatusAccepted {
		t.Fatalf("first webhook: HTTP %d", code)
	}
	waitInstants(t, c.Nodes[0], 2)
	stream := c.startStream(400 * time.Millisecond)
	for i := range c.Nodes {
		wait.Elapse(t.Context(), 3*time.Second) // traffic against the whole cluster
		stream.setDown(i, true)
		c.Nodes[i].stop(t)
		wait.Elapse(t.Context(), 6*time.Second) // longer than one period of the schedule
		c.Start(t, i)
		stream.setDown(i, false)
	}
	wait.Elapse(t.Context(), 3*time.Second) // traffic after the last restart
	deliveries := append(stream.finish(), first)
	waitNextInstant(t, c.Nodes[2]) // the schedule still fires after the last restart
	runs, statuses := c.checkDeliveries(t, c.Nodes[0], c.Nodes[1], deliveries, 4*time.Minute, true)
	c.checkLogsThroughEveryNode(t, runs)
	got, missed := scheduleInstants(t, c.Nodes[1])
	if !checkInstants(t, got, missed, 5) {
		logScheduleEvents(t, c.Nodes[1])
	}
	t.Logf("rolling restart: %d deliveries accepted (%d refused by stopping nodes), run statuses %v; schedule instants %v",
		len(deliveries), stream.refused, statuses, got)
}
