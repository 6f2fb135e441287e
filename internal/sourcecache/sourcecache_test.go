package sourcecache

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// countingStore counts the ingress look-ups that reach the database.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (c *countingStore) GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error) {
	c.reads.Add(1)
	return c.Store.GetIngressSourceByName(ctx, orgID, name)
}

func (c *countingStore) GetIngressSource(ctx context.Context, id string) (*store.IngressSource, error) {
	c.reads.Add(1)
	return c.Store.GetIngressSource(ctx, id)
}

// setup is a migrated database holding source "hooks" of org "acme" with
// secret s-1 ("one"), a cache listening over it, the counter under the
// cache, and a plain connection standing for another node.
func setup(t *testing.T) (*Store, *countingStore, *sql.DB) {
	t.Helper()
	return setupPinging(t, PingInterval, StaleAfter)
}

// setupPinging is setup with the given ping interval and staleness.
func setupPinging(t *testing.T, every, staleAfter time.Duration) (*Store, *countingStore, *sql.DB) {
	t.Helper()
	ctx := t.Context()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	addHooksSource(t, st)
	counted := &countingStore{Store: st}
	c, err := open(ctx, url, counted, nil, every, staleAfter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	wait.For(t, 10*time.Second, "the cache listening", c.Listening)
	other, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return c, counted, other
}

// ingressLookups are the look-ups both caches answer.
type ingressLookups interface {
	GetIngressSource(ctx context.Context, id string) (*store.IngressSource, error)
	GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error)
}

// byName looks source "hooks" of org "acme" up through c.
func byName(t *testing.T, c ingressLookups) *store.IngressSource {
	t.Helper()
	is, err := c.GetIngressSourceByName(t.Context(), "acme", "hooks")
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// byID looks source src-1 up through c.
func byID(t *testing.T, c ingressLookups) *store.IngressSource {
	t.Helper()
	is, err := c.GetIngressSource(t.Context(), "src-1")
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// addHooksSource creates source src-1, "hooks" of org "acme", with secret
// s-1 ("one") in st.
func addHooksSource(t *testing.T, st store.Store) {
	t.Helper()
	src := &store.Source{ID: "src-1", OrgID: "acme", Name: "hooks", Provider: provider.Generic, RoutingKey: "generic:acme:src-1",
		VerificationMethod: "hmac_sha256", WebhookSecret: "orig", Enabled: true, CreatedAt: time.Now()}
	if err := st.CreateSourceWithSettings(t.Context(), src, &store.SourceSettings{RateLimitRPM: 60},
		[]*store.SourceSecret{{ID: "s-1", Secret: "one", CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
}

// Repeated look-ups read the database once, each caller gets a copy of
// its own, and every kind of change (a secret revoked through the store,
// the source disabled and its settings changed by another node's plain
// statement, the source deleted) is seen by the look-ups that follow it.
func TestCachedSourcesFollowEveryChange(t *testing.T) {
	c, counted, other := setup(t)
	ctx := t.Context()

	first := byName(t, c)
	first.Secrets[0].Secret, first.Source.WebhookSecret = "changed by the caller", "changed too"
	for range 5 {
		is := byName(t, c)
		if is.Secrets[0].Secret != "one" || is.Source.WebhookSecret != "orig" {
			t.Fatalf("look-up after a caller changed its copy: %+v %+v", is.Source, is.Secrets[0])
		}
	}
	if n := counted.reads.Load(); n != 1 {
		t.Fatalf("6 look-ups read the database %d times, want 1", n)
	}
	byID(t, c)
	byID(t, c)
	if n := counted.reads.Load(); n != 2 {
		t.Fatalf("look-ups by id read the database %d times in all, want 2", n)
	}

	if err := c.RevokeSourceSecret(ctx, "src-1", "s-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the revocation seen by name and by id", func() bool {
		return byName(t, c).Secrets[0].RevokedAt != nil && byID(t, c).Secrets[0].RevokedAt != nil
	})

	if _, err := other.ExecContext(ctx, `UPDATE sources SET enabled = false WHERE id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the source disabled by another node", func() bool { return !byName(t, c).Source.Enabled })
	if _, err := other.ExecContext(ctx, `UPDATE source_settings SET config = jsonb_set(config::jsonb, '{rateLimitRpm}', '7')::text::jsonb WHERE source_id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "settings changed by another node", func() bool { return byName(t, c).Settings.RateLimitRPM == 7 })

	if _, err := other.ExecContext(ctx, `DELETE FROM source_secrets WHERE source_id = 'src-1'; DELETE FROM source_settings WHERE source_id = 'src-1'; DELETE FROM sources WHERE id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the source deleted", func() bool {
		_, err := c.GetIngressSourceByName(ctx, "acme", "hooks")
		return errors.Is(err, store.ErrNotFound)
	})
}

// Unknown names, which a sender chooses, are never kept; and while the
// LISTEN is lost nothing is cached, until it is back.
func TestUnknownNamesAndALostListen(t *testing.T) {
	c, counted, other := setup(t)
	ctx := t.Context()
	for range 3 {
		if _, err := c.GetIngressSourceByName(ctx, "acme", "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown name: %v", err)
		}
	}
	if n := counted.reads.Load(); n != 3 {
		t.Fatalf("3 look-ups of an unknown name read the database %d times, want 3", n)
	}
	c.mu.Lock()
	kept := len(c.byName) + len(c.byID)
	c.mu.Unlock()
	if kept != 0 {
		t.Fatalf("%d entries kept for unknown names", kept)
	}

	byName(t, c)
	if _, err := other.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN `+Channel+`'`); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the lost LISTEN noticed", func() bool { return !c.Listening() })
	// A change made while nobody listens is not missed: the cache was
	// dropped with the LISTEN, and is empty again when it is back.
	if _, err := other.ExecContext(ctx, `UPDATE sources SET enabled = false WHERE id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	if byName(t, c).Source.Enabled {
		t.Fatal("a look-up while not listening answered from memory")
	}
	wait.For(t, 10*time.Second, "listening again", c.Listening)
	before := counted.reads.Load()
	for range 2 {
		if byName(t, c).Source.Enabled {
			t.Fatal("stale source after listening again")
		}
	}
	if n := counted.reads.Load() - before; n != 1 {
		t.Fatalf("two look-ups after listening again read the database %d times, want 1", n)
	}
}

// A LISTEN connection that dies without a word hears nothing: when the
// node's own pings stop coming back, look-ups read the database again
// (and see a change made meanwhile) until they do.
func TestNoAnswerFromMemoryWithoutPingsBack(t *testing.T) {
	// Pings every 50 ms, trusted for a second: a loaded machine's pause
	// shorter than that leaves the cache trusted where the test wants it.
	c, counted, other := setupPinging(t, 50*time.Millisecond, time.Second)
	ctx := t.Context()
	byName(t, c)
	byName(t, c)
	if n := counted.reads.Load(); n != 1 {
		t.Fatalf("two look-ups while pinging read the database %d times, want 1", n)
	}
	c.pings.Store(false) // stands for a connection that died silently
	wait.For(t, 10*time.Second, "answers from memory stopped", func() bool { return !c.Listening() })
	before := counted.reads.Load()
	if _, err := other.ExecContext(ctx, `UPDATE sources SET enabled = false WHERE id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	if byName(t, c).Source.Enabled {
		t.Fatal("a look-up without pings back answered from memory")
	}
	byName(t, c)
	if n := counted.reads.Load() - before; n != 2 {
		t.Fatalf("two look-ups without pings back read the database %d times, want 2", n)
	}
	c.pings.Store(true)
	wait.For(t, 10*time.Second, "answers from memory again", c.Listening)
	before = counted.reads.Load()
	byName(t, c)
	byName(t, c)
	if n := counted.reads.Load() - before; n > 1 {
		t.Fatalf("two look-ups with pings back read the database %d times, want at most 1", n)
	}
}
