package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/store/sqlite"
)

// Direct mode never migrates: a database at another schema version than
// this binary's is refused with a message saying what to do, and is left as
// it was.
func TestDirectModeRefusesOtherSchemaVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kici.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sqlite.Migrations(st.DB())
	if err != nil {
		t.Fatal(err)
	}
	want := m.Expected()
	if err := m.DownTo(ctx, want-1); err != nil {
		t.Fatal(err)
	}
	st.Close()

	env := map[string]string{"KICI_ADMIN_URL": "http://127.0.0.1:1", "KICI_DATABASE_URL": "sqlite://" + path}
	_, errs, code := runDirect(env, "context", "list", "--org", "acme")
	if code == 0 {
		t.Fatal("context list on an older schema succeeded")
	}
	msg := fmt.Sprintf("schema is at %d, this kici-admin expects %d; upgrade the orchestrator first", want-1, want)
	if !strings.Contains(errs, msg) {
		t.Fatalf("stderr = %q, want %q", errs, msg)
	}

	st, err = sqlite.OpenCurrent(ctx, path)
	if err == nil {
		st.Close()
		t.Fatal("OpenCurrent accepted the older schema")
	}
	db, err := sqlite.Open(ctx, path) // the orchestrator's upgrade
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, errs, code := runDirect(env, "context", "list", "--org", "acme"); code != 0 {
		t.Fatalf("context list after the upgrade: exit %d: %s", code, errs)
	}
}

// KICI_DATABASE_URL is also the orchestrator's own variable: a shell that
// sourced the orchestrator's env file and names a server with --url reaches
// that server, not the database; --url and --database-url together are
// refused instead of one being picked silently.
func TestExplicitURLWinsOverDatabaseURLInEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.db")
	env := map[string]string{"KICI_DATABASE_URL": "sqlite://" + path}
	_, errs, code := runDirect(env, "--url", "http://127.0.0.1:1", "--token", "t", "context", "list", "--org", "acme")
	if code == 0 || strings.Contains(errs, "sqlite") || !strings.Contains(errs, "127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q: want an HTTP error naming 127.0.0.1:1, not a database error", code, errs)
	}
	_, errs, code = runDirect(nil, "--url", "http://127.0.0.1:1", "context", "list", "--org", "acme", "--database-url", "sqlite://"+path)
	if code == 0 || !strings.Contains(errs, "not both") {
		t.Fatalf("exit %d, stderr %q: want a refusal of --url with --database-url", code, errs)
	}
}
