package sourcecache

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

// setupRevisioned is a SQLite database holding source "hooks" of org
// "acme" with secret s-1 ("one"), a revision cache over it (reading the
// revision through rev when given, else from the store), the counter under
// the cache, and a plain connection standing for another process
// (the sqlite3 shell, say).
func setupRevisioned(t *testing.T, rev func(*sqlite.Store) RevisionReader) (*Revisioned, *countingStore, *sql.DB) {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "kici.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	addHooksSource(t, st)
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	counted := &countingStore{Store: st}
	var reader RevisionReader = st
	if rev != nil {
		reader = rev(st)
	}
	return NewRevisioned(counted, reader, nil), counted, other
}

// Repeated look-ups read the source once, each caller gets a copy of its
// own, and every kind of change, made through the store or by another
// process's plain statement, is seen by the very next look-up: no wait.
func TestRevisionedSourcesFollowEveryChange(t *testing.T) {
	c, counted, other := setupRevisioned(t, nil)
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
		t.Fatalf("6 look-ups read the source %d times, want 1", n)
	}
	hit := byName(t, c)
	hit.Secrets[0].Secret, hit.Source.WebhookSecret = "changed by the caller", "changed too"
	if is := byName(t, c); is.Secrets[0].Secret != "one" || is.Source.WebhookSecret != "orig" {
		t.Fatalf("look-up after a caller changed the copy it got from memory: %+v %+v", is.Source, is.Secrets[0])
	}
	byID(t, c)
	byID(t, c)
	if n := counted.reads.Load(); n != 2 {
		t.Fatalf("look-ups by id read the source %d times in all, want 2", n)
	}

	if err := c.RevokeSourceSecret(ctx, "src-1", "s-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if byName(t, c).Secrets[0].RevokedAt == nil || byID(t, c).Secrets[0].RevokedAt == nil {
		t.Fatal("the revocation not seen by the next look-ups")
	}
	exec := func(q string) {
		t.Helper()
		if _, err := other.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`UPDATE sources SET enabled = 0 WHERE id = 'src-1'`)
	if byName(t, c).Source.Enabled || byID(t, c).Source.Enabled {
		t.Fatal("the source disabled by another process not seen by the next look-ups")
	}
	exec(`UPDATE source_settings SET config = json_set(config, '$.rateLimitRpm', 7) WHERE source_id = 'src-1'`)
	if got := byName(t, c).Settings.RateLimitRPM; got != 7 {
		t.Fatalf("settings changed by another process: rate limit %d, want 7", got)
	}
	before := counted.reads.Load()
	byName(t, c)
	byID(t, c)
	if n := counted.reads.Load() - before; n != 1 {
		t.Fatalf("two look-ups after the last change read the source %d times, want 1 (by id)", n)
	}

	exec(`DELETE FROM source_secrets WHERE source_id = 'src-1'; DELETE FROM source_settings WHERE source_id = 'src-1'; DELETE FROM sources WHERE id = 'src-1'`)
	if _, err := c.GetIngressSourceByName(ctx, "acme", "hooks"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("look-up of the deleted source: %v, want ErrNotFound", err)
	}
	if _, err := c.GetIngressSource(ctx, "src-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("look-up of the deleted source by id: %v, want ErrNotFound", err)
	}
}

// Unknown names, which a sender chooses, are never kept.
func TestRevisionedKeepsNoUnknownName(t *testing.T) {
	c, counted, _ := setupRevisioned(t, nil)
	for range 3 {
		if _, err := c.GetIngressSourceByName(t.Context(), "acme", "nope"); !errors.Is(err, store.ErrNotFound) {
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
}

// revisionHook reads the store's revision, then runs after (once) before
// answering: a change committed between a look-up's revision read and its
// source read.
type revisionHook struct {
	st    *sqlite.Store
	after func()
	fail  error
}

func (h *revisionHook) SourceRevision(ctx context.Context) (int64, error) {
	if h.fail != nil {
		return 0, h.fail
	}
	rev, err := h.st.SourceRevision(ctx)
	if f := h.after; f != nil {
		h.after = nil
		f()
	}
	return rev, err
}

// The revision is read before the source: a change committed between the
// two is in what that look-up answers, and a change after it is read
// again by the next look-up.
func TestAChangeDuringALookUpIsNotKept(t *testing.T) {
	var hook *revisionHook
	c, counted, other := setupRevisioned(t, func(st *sqlite.Store) RevisionReader {
		hook = &revisionHook{st: st}
		return hook
	})
	hook.after = func() {
		if _, err := other.ExecContext(t.Context(), `UPDATE sources SET enabled = 0 WHERE id = 'src-1'`); err != nil {
			t.Error(err)
		}
	}
	if byName(t, c).Source.Enabled {
		t.Fatal("the look-up did not read the change committed before its source read")
	}
	if _, err := other.ExecContext(t.Context(), `UPDATE sources SET enabled = 1 WHERE id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	if !byName(t, c).Source.Enabled {
		t.Fatal("a look-up after the source was enabled again answered the disabled copy")
	}
	if n := counted.reads.Load(); n != 2 {
		t.Fatalf("two look-ups read the source %d times, want 2", n)
	}
	byName(t, c)
	if n := counted.reads.Load(); n != 2 {
		t.Fatalf("a third look-up with nothing changed read the source again (%d reads)", n)
	}
}

// When the revision cannot be read, every look-up reads the source, as
// without the cache, and nothing is kept; the failure is logged once, and
// so is the recovery, after which look-ups are answered from memory again.
func TestNoRevisionNoCache(t *testing.T) {
	var hook *revisionHook
	c, counted, _ := setupRevisioned(t, func(st *sqlite.Store) RevisionReader {
		hook = &revisionHook{st: st, fail: errors.New("database is locked")}
		return hook
	})
	var logged bytes.Buffer
	c.log = slog.New(slog.NewTextHandler(&logged, nil))
	for range 3 {
		byName(t, c)
	}
	if n := counted.reads.Load(); n != 3 {
		t.Fatalf("3 look-ups without a revision read the source %d times, want 3", n)
	}
	hook.fail = nil
	for range 3 {
		byName(t, c)
	}
	if n := counted.reads.Load(); n != 4 {
		t.Fatalf("3 look-ups with the revision back read the source %d times in all, want 4", n)
	}
	out := logged.String()
	if strings.Count(out, "cannot be read") != 1 || strings.Count(out, "is read again") != 1 || !strings.Contains(out, "database is locked") {
		t.Fatalf("want one warning with the error and one recovery line, got:\n%s", out)
	}
}

// A database file restored from an older copy brings back the revision
// drawn when its rows were current; the cache, which holds what it read at
// a later revision, is emptied by the difference, whichever value is
// greater.
func TestARestoredOlderCopyEmptiesTheCache(t *testing.T) {
	c, _, other := setupRevisioned(t, nil)
	ctx := t.Context()
	var old int64
	if err := other.QueryRowContext(ctx, `SELECT rev FROM source_revision`).Scan(&old); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, `UPDATE sources SET enabled = 0 WHERE id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	if byName(t, c).Source.Enabled {
		t.Fatal("the source disabled by another process not seen")
	}
	// The copy's rows (the source enabled) and its revision, as a restore
	// leaves them.
	restore, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE sources SET enabled = 1 WHERE id = 'src-1'`,
		`UPDATE source_revision SET rev = ` + fmt.Sprint(old),
	} {
		if _, err := restore.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := restore.Commit(); err != nil {
		t.Fatal(err)
	}
	if !byName(t, c).Source.Enabled {
		t.Fatal("a look-up after the restore answered the disabled copy")
	}
}

// nestingStore runs during (once) between its first source read and that
// read's answer: a change committed, and another look-up completed, while
// a look-up holds what it read before the change.
type nestingStore struct {
	*countingStore
	during func()
}

func (n *nestingStore) GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error) {
	is, err := n.countingStore.GetIngressSourceByName(ctx, orgID, name)
	if f := n.during; f != nil {
		n.during = nil
		f()
	}
	return is, err
}

// A look-up whose source read is overtaken by a change and by a look-up
// that read the changed source does not keep its older copy under the new
// revision.
func TestAnOvertakenLookUpKeepsNothing(t *testing.T) {
	c, counted, other := setupRevisioned(t, nil)
	nesting := &nestingStore{countingStore: counted}
	c.Store = nesting
	nesting.during = func() {
		if _, err := other.ExecContext(t.Context(), `UPDATE sources SET enabled = 0 WHERE id = 'src-1'`); err != nil {
			t.Error(err)
		}
		if byName(t, c).Source.Enabled {
			t.Error("the overtaking look-up did not see the change")
		}
	}
	if !byName(t, c).Source.Enabled {
		t.Fatal("the overtaken look-up should answer what it read before the change")
	}
	if byName(t, c).Source.Enabled {
		t.Fatal("the overtaken look-up's copy, read before the change, was kept and answered")
	}
}
