package readiness

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// fakeDB answers SchemaVersion with version, or blocks until its context
// ends when hang is set; it counts the round trips.
type fakeDB struct {
	version, want int64
	hang          bool
	calls         atomic.Int32
}

func (d *fakeDB) SchemaVersion(ctx context.Context) (int64, error) {
	d.calls.Add(1)
	if d.hang {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return d.version, nil
}

func (d *fakeDB) ExpectedSchemaVersion() int64 { return d.want }

type fakeNodes struct {
	nodes []*store.ClusterNode
	err   error
}

func (n fakeNodes) OtherLiveNodes(context.Context) ([]*store.ClusterNode, error) {
	return n.nodes, n.err
}

func checker(db *fakeDB, draining bool, nodes fakeNodes) *Checker {
	return &Checker{DB: NewDatabase(db), Draining: func() bool { return draining }, Nodes: nodes}
}

func TestReadyWhenDatabaseAnswersAtThisSchema(t *testing.T) {
	if err := checker(&fakeDB{version: 7, want: 7}, false, fakeNodes{}).Ready(t.Context()); err != nil {
		t.Fatalf("Ready = %v, want nil", err)
	}
	// A newer schema (a node already upgraded in a rolling upgrade) is
	// additive and keeps this node ready.
	if err := checker(&fakeDB{version: 8, want: 7}, false, fakeNodes{}).Ready(t.Context()); err != nil {
		t.Fatalf("Ready on a newer schema = %v, want nil", err)
	}
}

func TestNotReadyOnOlderSchemaSaysHowToMigrate(t *testing.T) {
	err := checker(&fakeDB{version: 6, want: 7}, false, fakeNodes{}).Ready(t.Context())
	if err == nil || !strings.Contains(err.Error(), "version 6, this node needs 7") || !strings.Contains(err.Error(), "migrate up") {
		t.Fatalf("Ready = %v, want the versions and the migrate command", err)
	}
}

func TestNotReadyWhenDatabaseDoesNotAnswerWithinTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := checker(&fakeDB{hang: true, want: 1}, false, fakeNodes{}).Ready(context.Background())
		if err == nil || !strings.Contains(err.Error(), "database unreachable: no answer within 2s") {
			t.Fatalf("Ready = %v, want database unreachable within the timeout", err)
		}
		if got := time.Since(start); got != Timeout {
			t.Fatalf("Ready returned after %s, want exactly the %s timeout", got, Timeout)
		}
	})
}

func TestDrainingNodeIsNotReadyOnlyWhileAnotherTakesWork(t *testing.T) {
	db := &fakeDB{version: 1, want: 1}
	taking := fakeNodes{nodes: []*store.ClusterNode{{ID: "b", Draining: true}, {ID: "c"}}}
	err := checker(db, true, taking).Ready(t.Context())
	if err == nil || !strings.HasPrefix(err.Error(), "draining:") {
		t.Fatalf("draining beside a live node: Ready = %v, want draining", err)
	}
	for name, nodes := range map[string]fakeNodes{
		"alone":               {},
		"every node draining": {nodes: []*store.ClusterNode{{ID: "b", Draining: true}}},
		"registry unreadable": {err: errors.New("boom")},
	} {
		if err := checker(db, true, nodes).Ready(t.Context()); err != nil {
			t.Errorf("%s: Ready = %v, want ready (webhooks still accepted and queued)", name, err)
		}
	}
	if err := checker(db, false, taking).Ready(t.Context()); err != nil {
		t.Errorf("not draining: Ready = %v", err)
	}
}

func TestProbeIsSharedForASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &fakeDB{version: 3, want: 3}
		h := NewDatabase(db)
		for range 5 {
			if _, ok, err := h.Answer(context.Background()); !ok || err != nil {
				t.Fatalf("Answer = %v, %v", ok, err)
			}
		}
		if n := db.calls.Load(); n != 1 {
			t.Fatalf("5 probes within a second made %d round trips, want 1", n)
		}
		wait.Elapse(context.Background(), cacheFor)
		h.Probe(context.Background())
		if n := db.calls.Load(); n != 2 {
			t.Fatalf("a probe a second later made %d round trips in all, want 2", n)
		}
	})
}
