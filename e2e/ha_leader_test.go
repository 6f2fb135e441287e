//go:build ha

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// leaderOf returns the index of the node whose current process logged the
// most recent "scheduler: leading", or -1.
func (c *haCluster) leaderOf(t *testing.T) int {
	t.Helper()
	leader, latest := -1, ""
	for i := range c.Nodes {
		for _, line := range strings.Split(c.NodeLog(t, i), "\n") {
			if strings.Contains(line, `msg="scheduler: leading"`) && line > latest {
				leader, latest = i, line
			}
		}
	}
	return leader
}

// kill -9 of the scheduler's leader among three nodes: another node takes
// the lease once it expires (30 s TTL) and catches up the latest instant
// that fell due meanwhile, the ones before it are recorded missed, and no
// instant fires twice — also after the killed node comes back with its
// own lease id. Prints the takeover time.
func TestHAKill9OfSchedulerLeaderTakenOverWithinTTL(t *testing.T) {
	c := startHACluster(t, 3)
	if _, code := c.push(0, fmt.Sprintf("leader-%d", time.Now().UnixNano())); code != http.StatusAccepted {
		t.Fatalf("webhook: HTTP %d", code)
	}
	waitInstants(t, c.Nodes[0], 2)
	leader := c.leaderOf(t)
	if leader < 0 {
		t.Fatal("no node logged scheduler: leading")
	}
	c.Kill9(t, leader)
	killedAt := time.Now()
	other := (leader + 1) % 3
	var newLeader int
	wait.For(t, 60*time.Second, "another node to take the scheduler lease", func() bool {
		for i := range c.Nodes {
			if i != leader && strings.Contains(c.NodeLog(t, i), `msg="scheduler: leading"`) {
				newLeader = i
				return true
			}
		}
		return false
	})
	takeover := time.Since(killedAt)
	waitNextInstant(t, c.Nodes[other])
	c.Start(t, leader) // back with its node id: it must not fire what the new leader fired
	waitNextInstant(t, c.Nodes[leader])

	got, missed := scheduleInstants(t, c.Nodes[other])
	for i := 1; i < len(got); i++ {
		if d := got[i] - got[i-1]; d <= 0 || d%5 != 0 {
			t.Errorf("instants %v: %d s between %d and %d, want a positive multiple of 5 (no instant twice)", got, d, got[i-1], got[i])
		}
		if d := got[i] - got[i-1]; d > 5 && missed == 0 {
			t.Errorf("instants %v skip %d s and no missed entry records it", got, d)
		}
	}
	t.Logf("kill -9 of leader node %d: node %d led %.1f s later (lease TTL 30 s); instants %v, %d missed entr(ies)",
		leader, newLeader, takeover.Seconds(), got, missed)
}
