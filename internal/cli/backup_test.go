package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// On PostgreSQL `kici-admin backup` refuses with the pg_dump procedure
// (and what to keep beside the dump), and without --out it says what to
// give; neither reaches a database.
func TestBackupRefusesPostgresWithProcedureAndNeedsOut(t *testing.T) {
	env := map[string]string{"KICI_DATABASE_URL": "postgres://kici@db/kici"}
	var out bytes.Buffer
	called := false
	o := IO{Stdout: &out, Stderr: &out, Getenv: func(k string) string { return env[k] },
		Backup: func(context.Context, BackupRequest, io.Writer) error { called = true; return nil }}
	if code := Run(context.Background(), []string{"backup", "--out", "x.db"}, o); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out.String())
	}
	for _, want := range []string{"pg_dump --format=custom", "KICI_SECRET_KEY", "blob store", "into a NEW database"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("answer lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	delete(env, "KICI_DATABASE_URL")
	if code := Run(context.Background(), []string{"backup"}, o); code != 1 || !strings.Contains(out.String(), "--out FILE is required") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	if called {
		t.Fatal("a refused backup reached the database")
	}
}
