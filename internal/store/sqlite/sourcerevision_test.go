package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// Every kind of change to a source, its settings or its secrets (each of
// the nine triggers on its own) gives the source revision a value it never
// had before, whichever connection makes it (another process's, with a
// plain statement, here); a rolled-back change and a change elsewhere do
// not change it.
func TestSourceRevisionMovesWithEveryChange(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kici.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	last, err := s.SourceRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	had := map[int64]string{last: "the migration"}
	moved := func(what string) {
		t.Helper()
		rev, err := s.SourceRevision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if before, ok := had[rev]; ok {
			t.Fatalf("%s: revision %d, which it already was after %s", what, rev, before)
		}
		had[rev], last = what, rev
	}
	stayed := func(what string) {
		t.Helper()
		if rev, err := s.SourceRevision(ctx); err != nil || rev != last {
			t.Fatalf("%s: revision %d (%v), want %d unchanged", what, rev, err, last)
		}
	}
	exec := func(q string) {
		t.Helper()
		if _, err := other.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	src := &store.Source{ID: "src-1", OrgID: "acme", Name: "hooks", Provider: provider.Generic, RoutingKey: "generic:acme:src-1",
		VerificationMethod: "hmac_sha256", WebhookSecret: "orig", Enabled: true, CreatedAt: time.Now()}
	if err := s.CreateSourceWithSettings(ctx, src, &store.SourceSettings{RateLimitRPM: 60},
		[]*store.SourceSecret{{ID: "s-1", Secret: "one", CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	moved("a source created with settings and a secret")
	exec(`INSERT INTO sources (id, org_id, name, provider, created_at) VALUES ('src-2', 'acme', 'two', 'generic', 0)`)
	moved("a source inserted alone")
	exec(`REPLACE INTO sources (id, org_id, name, provider, created_at) VALUES ('src-2', 'acme', 'two', 'generic', 1)`)
	moved("a source replaced (delete triggers do not fire for REPLACE)")
	exec(`UPDATE sources SET enabled = 0 WHERE id = 'src-2'`)
	moved("a source disabled")
	exec(`UPDATE sources SET enabled = 1 WHERE id = 'src-2'`)
	moved("the same source enabled again")
	exec(`DELETE FROM sources WHERE id = 'src-2'`)
	moved("that source deleted")
	if err := s.RevokeSourceSecret(ctx, "src-1", "s-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	moved("a secret revoked through the store")

	exec(`UPDATE sources SET enabled = 0 WHERE id = 'src-1'`)
	moved("a source updated")
	exec(`UPDATE source_settings SET config = '{}' WHERE source_id = 'src-1'`)
	moved("settings updated")
	exec(`INSERT INTO source_secrets (id, source_id, secret, created_at) VALUES ('s-2', 'src-1', 'two', 0)`)
	moved("a secret inserted")
	exec(`UPDATE source_secrets SET secret = 'three' WHERE id = 's-2'`)
	moved("a secret updated")

	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sources SET enabled = 1 WHERE id = 'src-1'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	stayed("a rolled-back update")
	exec(`UPDATE leases SET holder = holder`)
	stayed("a change to another table")

	exec(`DELETE FROM source_secrets WHERE id = 's-2'`)
	moved("a secret deleted")
	exec(`DELETE FROM source_settings WHERE source_id = 'src-1'`)
	moved("settings deleted")
	exec(`INSERT INTO source_settings (source_id, config, updated_at) VALUES ('src-1', '{}', 0)`)
	moved("settings inserted")
	exec(`DELETE FROM source_secrets`)
	moved("the remaining secret deleted")
	exec(`DELETE FROM source_settings`)
	moved("settings deleted again")
	exec(`DELETE FROM sources`)
	moved("a source deleted")
	exec(`INSERT INTO sources SELECT * FROM sources`)
	stayed("an insert of no row")
}
