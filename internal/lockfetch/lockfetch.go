// Package lockfetch reads lock files from forges and caches them by
// (provider, repository, ref). A lock is fetched, size-capped (KiCI
// lock_file_max_bytes, default 5 MiB, KICI_LOCK_FILE_MAX_BYTES) and parsed
// once per key while it parses. Only a parsed lock is cached: a "missing",
// "corrupt" or "too_large" outcome, like a transient fetch error, is
// fetched again next time, because it can be a property of the fetch
// rather than of the commit (a forge that does not serve a just-pushed
// SHA yet, a truncated or substituted response, a cap the operator has
// since raised), and caching it per SHA would fail every later event for
// that commit until restart. Such outcomes never crash the pipeline.
// Entries for commit SHAs never change and live until evicted (LRU);
// entries for branch or tag names expire after RefTTL.
package lockfetch

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"kici.dev/kici/internal/lockfile"
)

// LockPath is the lock file's path in a repository.
const LockPath = ".kici/kici.lock.json"

// DefaultMaxBytes is the lock size cap (5 MiB).
const DefaultMaxBytes = 5 << 20

// Defaults of a Cache.
const (
	// DefaultEntries is the LRU capacity.
	DefaultEntries = 512
	// DefaultRefTTL is how long an entry for a non-SHA ref stays valid.
	DefaultRefTTL = 30 * time.Second
)

// Status is the outcome of reading one lock: one of the Status* constants,
// kici's names for KiCI's lock outcomes (see docs/kici-compatibility.md#lock-file).
type Status string

// Outcome statuses of a fetch.
const (
	// StatusOK: the lock was read and parsed.
	StatusOK Status = "ok"
	// StatusMissing is KiCI lockfile_missing: no lock at the ref.
	StatusMissing Status = "missing"
	// StatusCorrupt is KiCI lockfile_corrupt: unparsable or invalid.
	StatusCorrupt Status = "corrupt"
	// StatusTooLarge: over the size cap (KiCI LockFileTooLargeError).
	StatusTooLarge Status = "too_large"
)

// Errors a Fetch function returns to report a definite outcome.
var (
	// ErrMissing: the lock file (or the ref) does not exist.
	ErrMissing = errors.New("lock file not found")
	// ErrTooLarge: the lock file is larger than the cap.
	ErrTooLarge = errors.New("lock file too large")
)

// Result is the outcome of reading one lock.
type Result struct {
	// Status is one of the Status* constants.
	Status Status
	// Lock is the parsed lock (StatusOK only).
	Lock *lockfile.LockFile
	// Size is the raw size in bytes (0 when unknown).
	Size int
	// Detail explains a non-ok status (the parse error, the cap).
	Detail string
	// Cached reports that the result came from the cache.
	Cached bool
}

// Fetch reads the raw lock bytes, returning ErrMissing or ErrTooLarge
// (wrapped is fine) for those outcomes, and any other error for transient
// failures. maxBytes is the cap to enforce.
type Fetch func(ctx context.Context, maxBytes int64) ([]byte, error)

type key struct{ provider, repo, ref string }

type entry struct {
	k       key
	res     Result
	expires time.Time // zero = never
}

// Cache caches lock outcomes. Create it with New; safe for concurrent use.
type Cache struct {
	// MaxBytes is the lock size cap (DefaultMaxBytes when ≤ 0).
	MaxBytes int64
	// MaxBytesFunc, when set, returns the live cap per fetch (the cluster
	// setting lock_file_max_bytes); values ≤ 0 fall back to MaxBytes.
	MaxBytesFunc func(ctx context.Context) int64
	// RefTTL is the validity of entries for non-SHA refs.
	RefTTL time.Duration

	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[key]*list.Element
	now   func() time.Time
	// flights deduplicates concurrent fetches of one key.
	flights map[key]*flight
}

type flight struct {
	done chan struct{}
	res  Result
	err  error
}

// New returns a cache holding at most entries results (DefaultEntries when
// ≤ 0).
func New(entries int, maxBytes int64) *Cache {
	if entries <= 0 {
		entries = DefaultEntries
	}
	return &Cache{MaxBytes: maxBytes, RefTTL: DefaultRefTTL, max: entries, ll: list.New(), items: map[key]*list.Element{},
		now: time.Now, flights: map[key]*flight{}}
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// IsSHA reports whether ref is a full commit SHA (SHA-1 or SHA-256 hex).
func IsSHA(ref string) bool { return shaRE.MatchString(ref) }

// Get returns the lock of (provider, repo, ref), from the cache or by
// calling fetch. A transient fetch error is returned as is; every other
// outcome is a Result. Only StatusOK results are cached.
func (c *Cache) Get(ctx context.Context, provider, repo, ref string, fetch Fetch) (Result, error) {
	k := key{provider, repo, ref}
	c.mu.Lock()
	if el, ok := c.items[k]; ok {
		e := el.Value.(*entry)
		if e.expires.IsZero() || c.now().Before(e.expires) {
			c.ll.MoveToFront(el)
			res := e.res
			c.mu.Unlock()
			res.Cached = true
			return res, nil
		}
		c.ll.Remove(el)
		delete(c.items, k)
	}
	if f, ok := c.flights[k]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.res, f.err
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	c.flights[k] = f
	c.mu.Unlock()

	f.res, f.err = c.load(ctx, fetch)

	c.mu.Lock()
	delete(c.flights, k)
	if f.err == nil && f.res.Status == StatusOK {
		e := &entry{k: k, res: f.res}
		if !IsSHA(ref) {
			ttl := c.RefTTL
			if ttl <= 0 {
				ttl = DefaultRefTTL
			}
			e.expires = c.now().Add(ttl)
		}
		c.items[k] = c.ll.PushFront(e)
		for c.ll.Len() > c.max {
			old := c.ll.Back()
			c.ll.Remove(old)
			delete(c.items, old.Value.(*entry).k)
		}
	}
	c.mu.Unlock()
	close(f.done)
	return f.res, f.err
}

func (c *Cache) load(ctx context.Context, fetch Fetch) (res Result, err error) {
	maxBytes := c.MaxBytes
	if c.MaxBytesFunc != nil {
		if n := c.MaxBytesFunc(ctx); n > 0 {
			maxBytes = n
		}
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	defer func() {
		// A fetch or parse bug must never take the pipeline down.
		if v := recover(); v != nil {
			res, err = Result{Status: StatusCorrupt, Detail: fmt.Sprintf("lock could not be read: %v", v)}, nil
		}
	}()
	raw, err := fetch(ctx, maxBytes)
	switch {
	case errors.Is(err, ErrMissing):
		return Result{Status: StatusMissing, Detail: "no " + LockPath + " at this ref"}, nil
	case errors.Is(err, ErrTooLarge):
		return Result{Status: StatusTooLarge, Detail: fmt.Sprintf("%s is larger than the %d-byte cap (lock_file_max_bytes)", LockPath, maxBytes)}, nil
	case err != nil:
		return Result{}, err
	}
	if int64(len(raw)) > maxBytes {
		return Result{Status: StatusTooLarge, Size: len(raw), Detail: fmt.Sprintf("%s is larger than the %d-byte cap (lock_file_max_bytes)", LockPath, maxBytes)}, nil
	}
	lf, perr := lockfile.Parse(raw)
	if perr != nil {
		return Result{Status: StatusCorrupt, Size: len(raw), Detail: perr.Error()}, nil
	}
	return Result{Status: StatusOK, Lock: lf, Size: len(raw)}, nil
}

// Len returns the number of cached entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
