package postgres_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/storetest"
	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pool.close()
	if err := pgtest.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
	}
	os.Exit(code)
}

// withPoolSize sets a pool large enough that the concurrent-claim tests
// really run claims in parallel.
func withPoolSize(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set("pool_max_conns", "16")
	u.RawQuery = q.Encode()
	return u.String()
}

// slots is the number of databases the tests share: creating a PostgreSQL
// database and migrating it costs far more than a conformance case, so
// each test borrows one of a few migrated databases, alone, and empties it
// when done; the next test to borrow it finds it as a fresh database would
// be.
const slots = 3

// slot is one migrated database of the pool and a store open on it.
type slot struct {
	url string
	s   *postgres.Store
}

// databasePool hands out migrated, empty databases, one test at a time
// each, each as soon as it is ready. They live until the test process ends
// (TestMain).
type databasePool struct {
	once   sync.Once
	free   chan *slot
	failed chan error // receives the first error of setting up a slot
	mu     sync.Mutex
	all    []*slot
}

var pool databasePool

func (p *databasePool) get(t *testing.T) *slot {
	t.Helper()
	p.once.Do(func() {
		p.free = make(chan *slot, slots)
		p.failed = make(chan error, slots)
		// The first database is made alone, so the first test starts as
		// early as it can; the others are made while it runs.
		go func() {
			if !p.add() {
				return
			}
			for i := 1; i < slots; i++ {
				go p.add()
			}
		}()
	})
	var sl *slot
	select {
	case sl = <-p.free:
	case err := <-p.failed:
		p.failed <- err // for the next test waiting
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := empty(context.Background(), sl.s.DB()); err != nil {
			t.Errorf("emptying the database after the test: %v", err)
			return // a database that is not empty is not given out again
		}
		p.free <- sl
	})
	return sl
}

// add creates and migrates one database and hands it out; false (and the
// error on p.failed) when that fails.
func (p *databasePool) add() bool {
	ctx := context.Background()
	u, err := pgtest.NewDatabase(ctx)
	if err != nil {
		p.failed <- err
		return false
	}
	u = withPoolSize(u)
	s, err := postgres.Open(ctx, u)
	if err != nil {
		p.failed <- err
		return false
	}
	sl := &slot{url: u, s: s}
	p.mu.Lock()
	p.all = append(p.all, sl)
	p.mu.Unlock()
	p.free <- sl
	return true
}

// close closes the pool's stores (the throwaway server drops the
// databases when it stops).
func (p *databasePool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sl := range p.all {
		sl.s.Close()
	}
}

// empty deletes every row and restarts every sequence, leaving the schema
// (and goose's version table and sequence) as migrations made it. Foreign keys are not
// checked meanwhile (session_replication_role = replica), so the order of
// the deletes does not matter.
func empty(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT quote_ident(tablename) FROM pg_tables
		WHERE schemaname = current_schema() AND tablename <> 'goose_db_version'`)
	if err != nil {
		return err
	}
	var stmts []string
	for rows.Next() {
		var table string
		if err := rows.Scan(&table); err != nil {
			rows.Close()
			return err
		}
		stmts = append(stmts, "DELETE FROM "+table)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit it only returns sql.ErrTxDone
	for _, q := range append([]string{"SET LOCAL session_replication_role = replica"}, stmts...) {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `SELECT setval(c.oid, 1, false) FROM pg_class c
		WHERE c.relkind = 'S' AND c.relnamespace = current_schema()::regnamespace
		AND c.relname NOT LIKE 'goose\_db\_version%'`); err != nil {
		return err
	}
	return tx.Commit()
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return pool.get(t).s })
}

// Every migration runs down to 0 and up again.
func TestMigrationsDownAndUp(t *testing.T) {
	t.Parallel()
	s := pool.get(t).s
	m, err := postgres.Migrations(s.DB())
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunMigrations(t, s, m)
}

func TestOpenTwiceMigratesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pool.get(t).url
	for i := 0; i < 2; i++ {
		s, err := postgres.Open(ctx, u)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		if i == 0 {
			if err := s.CreateSource(ctx, &store.Source{ID: "s1", OrgID: "o", Name: "n", Provider: "local"}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.GetSource(ctx, "s1"); err != nil {
			t.Fatalf("source lost across reopen: %v", err)
		}
		s.Close()
	}
}

func TestOpenBadURL(t *testing.T) {
	t.Parallel()
	if _, err := postgres.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	if _, err := postgres.OpenCurrent(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); err == nil ||
		!strings.Contains(err.Error(), "connect") {
		t.Fatalf("OpenCurrent of an unreachable server: %v", err)
	}
}

func BenchmarkClaimNext(b *testing.B) { storetest.BenchmarkClaimNext(b, benchStore(b)) }

func BenchmarkDispatchRows(b *testing.B) { storetest.BenchmarkDispatchRows(b, benchStore(b)) }

// BenchmarkStartJob times a job's start on PostgreSQL, in one call and in the
// two it replaced (storetest.BenchmarkStartJob).
func BenchmarkStartJob(b *testing.B) { storetest.BenchmarkStartJob(b, benchStore(b)) }

// benchStore opens a store on a fresh database of the throwaway server,
// closed when the benchmark ends.
func benchStore(b *testing.B) store.Store {
	b.Helper()
	u, err := pgtest.NewDatabase(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	s, err := postgres.Open(context.Background(), withPoolSize(u))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// A fresh database migrated up has exactly the schema recorded in
// testdata/schema.golden.
func TestSchemaMatchesGolden(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckSchemaGolden(t, s.DB(), true)
}

// A webhook payload is stored compressed with lz4 (migration toast_lz4),
// and reads back byte for byte.
func TestDeliveryPayloadsCompressWithLZ4(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pool.get(t).s
	payload, err := os.ReadFile("../../../testdata/github-webhooks/push.none.1.json")
	if err != nil {
		t.Fatal(err)
	}
	d := &store.Delivery{ID: "d-lz4", Event: "push", Payload: payload}
	e := &store.EventLogEntry{ID: "e-lz4", Event: "push", Source: "github"}
	if err := s.AcceptDelivery(ctx, d, e); err != nil {
		t.Fatal(err)
	}
	var method string
	if err := s.DB().QueryRowContext(ctx, `SELECT COALESCE(pg_column_compression(payload), 'none') FROM deliveries WHERE id = $1`, d.ID).Scan(&method); err != nil {
		t.Fatal(err)
	}
	if method != "lz4" {
		t.Fatalf("payload compression = %s, want lz4", method)
	}
	got, err := s.GetDelivery(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Payload, payload) {
		t.Fatalf("payload read back differs (%d bytes, want %d)", len(got.Payload), len(payload))
	}
}
