package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"kici.dev/kici/internal/store"
)

// ReadyTimeout bounds the database round trip of one readiness check: a
// database that does not answer within it makes the node not ready, so a
// probe never hangs on a stopped or partitioned database.
const ReadyTimeout = 2 * time.Second

// readyCacheFor is how long one readiness result answers every probe: /ready
// is unauthenticated, so a flood of probes costs at most one database
// round trip per interval.
const readyCacheFor = time.Second

// schemaReader is what readiness asks the store (sqlstore.Store is one).
type schemaReader interface {
	SchemaVersion(ctx context.Context) (int64, error)
	ExpectedSchemaVersion() int64
}

// dbProbe is one database round trip: how long it took and what it found.
type dbProbe struct {
	at      time.Time
	latency time.Duration
	version int64
	err     error // the database did not answer within ReadyTimeout
}

// dbHealth times database round trips for readiness and /metrics and keeps
// the last result for readyCacheFor; concurrent callers share one trip.
type dbHealth struct {
	db  schemaReader
	mu  sync.Mutex
	got dbProbe
}

// probe returns a result at most readyCacheFor old, taking a new one (under
// ReadyTimeout) when needed.
func (h *dbHealth) probe(ctx context.Context) dbProbe {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.got.at.IsZero() && time.Since(h.got.at) < readyCacheFor {
		return h.got
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReadyTimeout)
	defer cancel()
	start := time.Now()
	v, err := h.db.SchemaVersion(ctx)
	h.got = dbProbe{at: time.Now(), latency: time.Since(start), version: v, err: err}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		h.got.err = fmt.Errorf("no answer within %s", ReadyTimeout)
	}
	return h.got
}

// answer probes the database (servermetrics.Ops.Database): the round
// trip's latency, whether the schema is at least this binary's, and an
// error when it did not answer.
func (h *dbHealth) answer(ctx context.Context) (time.Duration, bool, error) {
	p := h.probe(ctx)
	return p.latency, p.err == nil && p.version >= h.db.ExpectedSchemaVersion(), p.err
}

// ready is GET /ready: nil when this node can serve, else the first reason
// it cannot, in the order an operator fixes them: the database answers
// within ReadyTimeout; its schema is at least this binary's version (a
// schema rolled back under a running node lacks what its queries need; a
// newer one, left by a node already upgraded in a rolling upgrade, is
// additive by policy and keeps it ready); the node is not draining while
// another live node takes work. A drain of every node keeps them ready:
// webhooks are still accepted and queued, and a load balancer with no
// ready node would refuse them.
func (s *Server) ready(ctx context.Context) error {
	p := s.dbHealth.probe(ctx)
	if p.err != nil {
		return fmt.Errorf("database unreachable: %v", p.err)
	}
	if want := s.dbHealth.db.ExpectedSchemaVersion(); p.version < want {
		return fmt.Errorf("database schema is at version %d, this node needs %d: run `kici-orchestrator migrate up` or restart the node (it migrates at start)", p.version, want)
	}
	if s.dispatcher.Draining() && s.otherNodeTakesWork(ctx) {
		return errors.New("draining: this node takes no new jobs (`kici-admin orchestrator resume` ends it)")
	}
	return nil
}

// readyFunc is the admin API's readiness check: ready, or nil (always
// ready) for a store that cannot report its schema.
func (s *Server) readyFunc() func(context.Context) error {
	if s.dbHealth == nil {
		return nil
	}
	return s.ready
}

// otherNodeTakesWork reports whether another node heartbeated within the
// liveness window and is not draining.
func (s *Server) otherNodeTakesWork(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	others, err := s.node.OtherLiveNodes(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(others, func(n *store.ClusterNode) bool { return !n.Draining })
}
