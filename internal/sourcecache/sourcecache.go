// Package sourcecache keeps the sources that webhooks are checked against
// in memory on PostgreSQL, so that accepting a webhook is one round trip
// (its insert) instead of two (the source with its settings and secrets,
// then the insert).
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
// Only sources that exist are cached: a look-up of an unknown name (which
// a sender chooses) always reads the database, so the cache holds at most
// one entry per source.
package sourcecache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"kici.dev/kici/internal/pglisten"
	"kici.dev/kici/internal/store"
)

// Channel is the LISTEN/NOTIFY channel of source changes (migration
// source_change_notify).
const Channel = "kici_sources"

// Store is a store.Store whose GetIngressSource and GetIngressSourceByName
// answers are kept in memory while it listens (see the package doc).
// Every other method is the wrapped store's. Safe for concurrent use.
type Store struct {
	store.Store

	mu        sync.Mutex
	listening bool
	gen       uint64 // moves on every drop: a read begun before it is not kept
	byID      map[string]*store.IngressSource
	byName    map[nameKey]*store.IngressSource

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

// Open is New with a LISTEN on Channel of its own, over one connection to
// the database at url, until Stop. Errors: an unparsable URL or an
// unreachable database.
func Open(ctx context.Context, url string, st store.Store, log *slog.Logger) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("sourcecache: parse database url: %w", err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sourcecache: connect: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := New(st)
	lctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done, c.pool = cancel, make(chan struct{}), pool
	go func() {
		defer close(c.done)
		c.Listen(lctx, pool, log)
	}()
	return c, nil
}

// Stop ends Open's LISTEN and drops the cache: look-ups read the wrapped
// store from then on. The wrapped store stays open (its Close is Store's).
func (c *Store) Stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.pool.Close()
	}
	c.stop()
}

// Listen keeps the cache while a LISTEN on Channel through pool is in
// effect, until ctx ends; it returns then.
func (c *Store) Listen(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) {
	pglisten.RunTracked(ctx, pool, Channel, log, c.start, c.stop, func(string) { c.drop() })
}

// Listening reports whether look-ups are being cached.
func (c *Store) Listening() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listening
}

func (c *Store) start() { c.set(true) }
func (c *Store) stop()  { c.set(false) }

func (c *Store) set(listening bool) {
	c.mu.Lock()
	c.listening = listening
	c.mu.Unlock()
	c.drop()
}

// drop empties the cache and makes every read in flight unfit to keep.
func (c *Store) drop() {
	c.mu.Lock()
	c.gen++
	clear(c.byID)
	clear(c.byName)
	c.mu.Unlock()
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
	if is, ok := m[key]; ok {
		c.mu.Unlock()
		return clone(is), nil
	}
	listening, gen := c.listening, c.gen
	c.mu.Unlock()
	is, err := read()
	if err != nil || !listening {
		return is, err
	}
	kept := clone(is)
	c.mu.Lock()
	if c.listening && c.gen == gen {
		m[key] = kept
	}
	c.mu.Unlock()
	return is, nil
}

// clone copies is down to the values a caller may change in place (the
// source and each secret).
func clone(is *store.IngressSource) *store.IngressSource {
	c := *is
	if is.Source != nil {
		src := *is.Source
		c.Source = &src
	}
	if is.Settings != nil {
		set := *is.Settings
		c.Settings = &set
	}
	if is.Secrets != nil {
		c.Secrets = make([]*store.SourceSecret, len(is.Secrets))
		for i, s := range is.Secrets {
			sc := *s
			c.Secrets[i] = &sc
		}
	}
	return &c
}
