package sourcecache

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"kici.dev/kici/internal/store"
)

// RevisionReader reads a value that changes with every committed change to
// sources, their settings or their secrets, whoever made it, and names one
// committed state of them (sqlstore.Store.SourceRevision on SQLite: a new
// random 64-bit value drawn by the triggers of migration source_revision
// with each change). Values are compared for equality only.
type RevisionReader interface {
	SourceRevision(ctx context.Context) (int64, error)
}

// Revisioned is a store.Store whose GetIngressSource and
// GetIngressSourceByName answers come from memory while the source
// revision is the one they were read at: SQLite's counterpart of Store,
// for a database that announces no change (another process, such as the
// sqlite3 shell, can write the same file). Every look-up still reads the
// revision, one row, instead of the source joined with its settings and
// secrets; a look-up that finds the revision moved empties the cache and
// reads the source again. So an answer is never older than the look-up's
// own read of the revision: a revoked secret or a disabled source is
// refused from the first look-up after its commit, as without the cache.
// Every other method is the wrapped store's. Safe for concurrent use.
type Revisioned struct {
	store.Store
	rev RevisionReader
	log *slog.Logger
	// failing is set while the revision cannot be read, so that the
	// failure and the recovery are logged once each.
	failing atomic.Bool

	mu     sync.Mutex
	seen   int64 // the last revision read; the entries were read at it
	byID   map[string]*store.IngressSource
	byName map[nameKey]*store.IngressSource
}

// NewRevisioned returns st with its ingress look-ups kept in memory,
// checked against rev on every look-up; log (nil: discarded) hears when
// the revision cannot be read and when it can again.
func NewRevisioned(st store.Store, rev RevisionReader, log *slog.Logger) *Revisioned {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Revisioned{Store: st, rev: rev, log: log, seen: -1,
		byID: map[string]*store.IngressSource{}, byName: map[nameKey]*store.IngressSource{}}
}

// GetIngressSource is the wrapped store's, from memory while the revision
// has not moved.
func (c *Revisioned) GetIngressSource(ctx context.Context, id string) (*store.IngressSource, error) {
	return revisionLookup(ctx, c, c.byID, id, func() (*store.IngressSource, error) { return c.Store.GetIngressSource(ctx, id) })
}

// GetIngressSourceByName is the wrapped store's, from memory while the
// revision has not moved.
func (c *Revisioned) GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error) {
	return revisionLookup(ctx, c, c.byName, nameKey{orgID, name}, func() (*store.IngressSource, error) {
		return c.Store.GetIngressSourceByName(ctx, orgID, name)
	})
}

// revisionLookup reads the revision, then answers key from m when it is
// the one m's entries were read at, or reads the source and keeps a copy.
// A revision other than the last one read empties the cache first, and a
// copy is kept only while the revision is still the one read before it:
// the revision is read before the source, so a change committed between
// the two leaves an entry tagged older than what it holds, which the next
// look-up drops; never the other way round. Any difference empties the
// cache, whichever value came first: two look-ups can read two revisions
// in either order, and a database file restored from an older copy brings
// back the value drawn when its rows were current. When the revision
// cannot be read, the source is read as without the cache and the failure
// is the read's to report. Callers get a copy of their own: the secrets
// layer above opens secrets in place. Unknown keys are never kept (a
// sender chooses them).
func revisionLookup[K comparable](ctx context.Context, c *Revisioned, m map[K]*store.IngressSource, key K, read func() (*store.IngressSource, error)) (*store.IngressSource, error) {
	rev, err := c.rev.SourceRevision(ctx)
	if err != nil {
		if ctx.Err() == nil && !c.failing.Swap(true) {
			c.log.Warn("the source revision cannot be read: every webhook reads its source from the database until it can", "err", err)
		}
		return read()
	}
	if c.failing.Swap(false) {
		c.log.Info("the source revision is read again: webhook sources are kept in memory again")
	}
	c.mu.Lock()
	if rev != c.seen {
		c.seen = rev
		clear(c.byID)
		clear(c.byName)
	}
	if is, ok := m[key]; ok {
		c.mu.Unlock()
		return clone(is), nil
	}
	c.mu.Unlock()
	is, err := read()
	if err != nil {
		return is, err
	}
	kept := clone(is)
	c.mu.Lock()
	if c.seen == rev {
		m[key] = kept
	}
	c.mu.Unlock()
	return is, nil
}
