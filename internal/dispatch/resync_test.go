package dispatch

import (
	"testing"
	"time"
)

// alonePeers is a Peers whose last heartbeat found others or not.
type alonePeers struct{ alone bool }

func (alonePeers) CancelJob(string, string, bool, bool) bool { return false }
func (p alonePeers) Alone() bool                             { return p.alone }

// A node alone on its database (no peers: SQLite; or peers that found no
// other live node) merges its pending index with the store rarely, since
// every entry went through it; with other nodes alive it merges every
// resyncInterval, to see what they enqueued.
func TestResyncCadenceFollowsWhetherOtherNodesEnqueue(t *testing.T) {
	for _, c := range []struct {
		name  string
		peers Peers
		want  time.Duration
	}{
		{"no peers (SQLite)", nil, loneResyncInterval},
		{"PostgreSQL, alone", alonePeers{alone: true}, loneResyncInterval},
		{"PostgreSQL, other nodes alive", alonePeers{alone: false}, resyncInterval},
	} {
		d := &Dispatcher{peers: c.peers}
		if got := d.resyncEvery(); got != c.want {
			t.Errorf("%s: resync every %v, want %v", c.name, got, c.want)
		}
	}
}
