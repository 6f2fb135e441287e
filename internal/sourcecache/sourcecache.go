// Package sourcecache keeps the sources that webhooks are checked against
// in memory, so that accepting a webhook does not read a source with its
// settings and secrets every time: on PostgreSQL the accept is then one
// round trip (its insert) instead of two; on SQLite, which announces no
// change, each look-up reads one row instead, the revision that the
// triggers of migration source_revision move with every change
// (Revisioned, revision.go). What follows is PostgreSQL's Store.
//
// A cached source must never outlive a change to it: a revoked secret or a
// disabled source is refused as soon as the change is committed. So the
// cache is kept only while this node LISTENs on Channel, where the
// triggers of migration source_change_notify send a notification at the
// commit of every change to sources, source_settings or source_secrets,
// whoever made it (the API on any node, a hand-written statement). A
// notification empties the cache; while the LISTEN is not in effect (not
// yet, or its connection lost) nothing is cached and every look-up reads
// the database, as without the cache. What is left is the notification's
// own delay after the commit, milliseconds on one database.
//
// A connection can also die without a word (a server that fails over or
// becomes unreachable sends no reset), and then its LISTEN hears nothing
// until TCP gives up, minutes later. So the node also sends itself a ping
// on Channel every PingInterval, through a connection of its own, and
// answers from memory only while its last ping came back within
// StaleAfter: that bounds what such a death can leave stale to StaleAfter,
// and it also proves that the LISTEN and the node's writes reach the same
// server. A change's notification committed before a ping is delivered
// before it, so a ping heard means every earlier change was heard.
//
// Only sources that exist are cached: a look-up of an unknown name (which
// a sender chooses) always reads the database, so the cache holds at most
// two entries per source (by id, by name).
package sourcecache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kici.dev/kici/internal/pglisten"
	"kici.dev/kici/internal/pgpool"
	"kici.dev/kici/internal/store"
)

// Channel is the LISTEN/NOTIFY channel of source changes (migration
// source_change_notify).
const Channel = "kici_sources"

// PingInterval is how often a node pings itself on Channel; StaleAfter is
// how long after its last ping came back it stops answering from memory.
const (
	PingInterval = 2 * time.Second
	StaleAfter   = 3 * PingInterval
)

// pingPrefix starts a ping's payload (the rest is the node's nonce); a
// change's payload is empty.
const pingPrefix = "ping:"

// Store is a store.Store whose GetIngressSource and GetIngressSourceByName
// answers are kept in memory while it listens (see the package doc).
// Every other method is the wrapped store's. Safe for concurrent use.
type Store struct {
	store.Store

	mu        sync.Mutex
	listening bool
	heard     time.Time // when this node's last ping came back
	gen       uint64    // moves on every drop: a read begun before it is not kept
	byID      map[string]*store.IngressSource
	byName    map[nameKey]*store.IngressSource

	staleAfter time.Duration // 0: pings are not required (New without Open)
	nonce      string
	// pings is true from Open on. Tests clear it to stand for a
	// connection that died silently: the pinger then sends nothing, and a
	// ping already on its way when it was cleared is not counted either
	// (on a loaded machine one can arrive after the staleness has run out).
	pings atomic.Bool

	cancel context.CancelFunc
	done   chan struct{}
	pool   *pgxpool.Pool
}

type nameKey struct{ org, name string }

// New returns st with its ingress look-ups cached once Listen runs; until
// then (and without it) every look-up reads st.
func New(st store.Store) *Store {
	return &Store{Store: st, byID: map[string]*store.IngressSource{}, byName: map[nameKey]*store.IngressSource{}}
}

// Open is New with a LISTEN on Channel of its own and the pings that keep
// it trusted (see the package doc), over two connections to the database at
// url, until Stop. Errors: an unparsable URL or an unreachable database.
func Open(ctx context.Context, url string, st store.Store, log *slog.Logger) (*Store, error) {
	return open(ctx, url, st, log, PingInterval, StaleAfter)
}

func open(ctx context.Context, url string, st store.Store, log *slog.Logger, every, staleAfter time.Duration) (*Store, error) {
	pool, err := pgpool.Open(ctx, url, 2) // one listens, one pings
	if err != nil {
		return nil, fmt.Errorf("sourcecache: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := New(st)
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	c.staleAfter, c.nonce = staleAfter, hex.EncodeToString(nonce)
	c.pings.Store(true)
	lctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done, c.pool = cancel, make(chan struct{}), pool
	var wg sync.WaitGroup
	wg.Go(func() { c.Listen(lctx, pool, log) })
	wg.Go(func() { c.ping(lctx, pool, every, log) })
	go func() {
		wg.Wait()
		close(c.done)
	}()
	return c, nil
}

// ping sends this node's ping every interval until ctx ends.
func (c *Store) ping(ctx context.Context, pool *pgxpool.Pool, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.pings.Load() {
			continue
		}
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, pingPrefix+c.nonce); err != nil && ctx.Err() == nil {
			log.Debug("source cache ping not sent", "err", err)
		}
	}
}

// Stop ends Open's LISTEN and drops the cache: look-ups read the wrapped
// store from then on. The wrapped store stays open (its Close is Store's).
func (c *Store) Stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.pool.Close()
	}
	c.set(false)
}

// Listen keeps the cache while a LISTEN on Channel through pool is in
// effect, until ctx ends; it returns then.
func (c *Store) Listen(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) {
	pglisten.RunTracked(ctx, pool, Channel, log, func() { c.set(true) }, func() { c.set(false) }, c.notified)
}

// Listening reports whether look-ups are being answered from memory.
func (c *Store) Listening() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trusted()
}

// trusted reports, under mu, whether the cache may answer: listening, and
// (when pings are required) the last ping back within staleAfter.
func (c *Store) trusted() bool {
	return c.listening && (c.staleAfter == 0 || time.Since(c.heard) < c.staleAfter)
}

// set starts or ends listening, with an empty cache either way.
func (c *Store) set(listening bool) {
	c.mu.Lock()
	c.listening, c.heard = listening, time.Now()
	c.dropLocked()
	c.mu.Unlock()
}

// notified handles one notification: this node's ping, another node's
// (ignored), or a change (the cache is emptied).
func (c *Store) notified(payload string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.nonce != "" && payload == pingPrefix+c.nonce:
		if c.pings.Load() {
			c.heard = time.Now()
		}
	case len(payload) >= len(pingPrefix) && payload[:len(pingPrefix)] == pingPrefix:
	default:
		c.dropLocked()
	}
}

// dropLocked empties the cache and makes every read in flight unfit to
// keep; mu is held.
func (c *Store) dropLocked() {
	c.gen++
	clear(c.byID)
	clear(c.byName)
}

// GetIngressSource is the wrapped store's, from memory when cached.
func (c *Store) GetIngressSource(ctx context.Context, id string) (*store.IngressSource, error) {
	return lookup(c, c.byID, id, func() (*store.IngressSource, error) { return c.Store.GetIngressSource(ctx, id) })
}

// GetIngressSourceByName is the wrapped store's, from memory when cached.
func (c *Store) GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error) {
	return lookup(c, c.byName, nameKey{orgID, name}, func() (*store.IngressSource, error) {
		return c.Store.GetIngressSourceByName(ctx, orgID, name)
	})
}

// lookup answers key from m, or reads it and keeps a copy when the cache
// was listening and nothing was dropped during the read. Callers get a
// copy of their own: the secrets layer above opens secrets in place.
func lookup[K comparable](c *Store, m map[K]*store.IngressSource, key K, read func() (*store.IngressSource, error)) (*store.IngressSource, error) {
	c.mu.Lock()
	trusted := c.trusted()
	if is, ok := m[key]; ok && trusted {
		c.mu.Unlock()
		return clone(is), nil
	}
	gen := c.gen
	c.mu.Unlock()
	is, err := read()
	if err != nil || !trusted {
		return is, err
	}
	kept := clone(is)
	c.mu.Lock()
	if c.trusted() && c.gen == gen {
		m[key] = kept
	}
	c.mu.Unlock()
	return is, nil
}

// clone copies is down to every value reached through a pointer or a
// slice, so that a caller changing its copy in place (the secrets layer
// opens secrets in place) cannot change the cache.
func clone(is *store.IngressSource) *store.IngressSource {
	c := *is
	if is.Source != nil {
		src := *is.Source
		c.Source = &src
	}
	if is.Settings != nil {
		set := *is.Settings
		set.IPAllowlist = slices.Clone(set.IPAllowlist)
		if set.GitHub != nil {
			gh := *set.GitHub
			set.GitHub = &gh
		}
		if set.Git != nil {
			g := *set.Git
			g.PayloadPaths, g.EventMapping = maps.Clone(g.PayloadPaths), maps.Clone(g.EventMapping)
			set.Git = &g
		}
		c.Settings = &set
	}
	if is.Secrets != nil {
		c.Secrets = make([]*store.SourceSecret, len(is.Secrets))
		for i, s := range is.Secrets {
			sc := *s
			if s.RevokedAt != nil {
				at := *s.RevokedAt
				sc.RevokedAt = &at
			}
			c.Secrets[i] = &sc
		}
	}
	return &c
}
