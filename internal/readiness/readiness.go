// Package readiness answers an orchestrator node's readiness probe (GET
// /ready) and times the database round trips /metrics reports: whether
// the node can serve now, and if not the first reason an operator has to
// fix.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"kici.dev/kici/internal/store"
)

// Timeout bounds the database round trip of one readiness check: a
// database that does not answer within it makes the node not ready, so a
// probe never hangs on a stopped or partitioned database.
const Timeout = 2 * time.Second

// cacheFor is how long one database probe answers every caller: /ready is
// unauthenticated, so a flood of probes costs at most one database round
// trip per interval.
const cacheFor = time.Second

// SchemaReader is what readiness asks the store (sqlstore.Store is one):
// the schema version the database is at, and the one this binary needs.
type SchemaReader interface {
	SchemaVersion(ctx context.Context) (int64, error)
	ExpectedSchemaVersion() int64
}

// Probe is one database round trip: when it was taken, how long it took,
// the schema version it read, and Err when the database did not answer
// (within Timeout).
type Probe struct {
	At      time.Time
	Latency time.Duration
	Version int64
	Err     error
}

// Database times round trips to one database and keeps the last result
// for a second; concurrent callers share one trip. Safe for concurrent
// use.
type Database struct {
	db  SchemaReader
	mu  sync.Mutex
	got Probe
}

// NewDatabase returns the prober of db.
func NewDatabase(db SchemaReader) *Database { return &Database{db: db} }

// Probe returns a result at most a second old, taking a new one (bounded
// by Timeout, whatever ctx's own deadline) when needed.
func (h *Database) Probe(ctx context.Context) Probe {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.got.At.IsZero() && time.Since(h.got.At) < cacheFor {
		return h.got
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
	defer cancel()
	start := time.Now()
	v, err := h.db.SchemaVersion(ctx)
	h.got = Probe{At: time.Now(), Latency: time.Since(start), Version: v, Err: err}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		h.got.Err = fmt.Errorf("no answer within %s", Timeout)
	}
	return h.got
}

// Answer is the shape servermetrics.Ops.Database wants: the round trip's
// latency, whether the schema is at least this binary's, and an error
// when the database did not answer.
func (h *Database) Answer(ctx context.Context) (time.Duration, bool, error) {
	p := h.Probe(ctx)
	return p.Latency, p.Err == nil && p.Version >= h.db.ExpectedSchemaVersion(), p.Err
}

// Nodes lists the other nodes of the cluster that heartbeated within the
// liveness window (membership.Node is one).
type Nodes interface {
	OtherLiveNodes(ctx context.Context) ([]*store.ClusterNode, error)
}

// Checker decides whether a node is ready. Every field is required.
type Checker struct {
	DB *Database
	// Draining reports whether this node takes no new jobs.
	Draining func() bool
	Nodes    Nodes
}

// Ready is GET /ready: nil when this node can serve, else the first
// reason it cannot, in the order an operator fixes them: the database
// answers within Timeout; its schema is at least this binary's version (a
// schema rolled back under a running node lacks what its queries need; a
// newer one, left by a node already upgraded in a rolling upgrade, is
// additive by policy and keeps it ready); the node is not draining while
// another live node takes work. A drain of every node keeps them ready:
// webhooks are still accepted and queued, and a load balancer with no
// ready node would refuse them.
func (c *Checker) Ready(ctx context.Context) error {
	p := c.DB.Probe(ctx)
	if p.Err != nil {
		return fmt.Errorf("database unreachable: %v", p.Err)
	}
	if want := c.DB.db.ExpectedSchemaVersion(); p.Version < want {
		return fmt.Errorf("database schema is at version %d, this node needs %d: run `kici-orchestrator migrate up` or restart the node (it migrates at start)", p.Version, want)
	}
	if c.Draining() && c.otherNodeTakesWork(ctx) {
		return errors.New("draining: this node takes no new jobs (`kici-admin orchestrator resume` ends it)")
	}
	return nil
}

// otherNodeTakesWork reports whether another node heartbeated within the
// liveness window and is not draining; an unreadable registry counts as
// no (the node then stays ready, the safe side for webhooks).
func (c *Checker) otherNodeTakesWork(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	others, err := c.Nodes.OtherLiveNodes(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(others, func(n *store.ClusterNode) bool { return !n.Draining })
}
