package sqlstore

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// Every template is listed once, each dialect's versions increase, and the
// rendered files are the ones goose will read: NNNNN_<name>.sql with an Up
// and a Down section and no template syntax left.
func TestRenderMigrations(t *testing.T) {
	files, err := fs.Glob(migrationTemplates, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range migrationVersions {
		listed = append(listed, "migrations/"+m.name+".sql")
	}
	slices.Sort(listed)
	if !slices.Equal(files, listed) {
		t.Fatalf("templates %v, listed in migrationVersions %v", files, listed)
	}
	for _, d := range []*Dialect{SQLite(), Postgres()} {
		fsys := mustRender(t, d)
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		var last int64
		for _, m := range migrationVersions {
			v := m.in(d)
			if v == 0 {
				continue
			}
			if v <= last {
				t.Errorf("%s: %s has version %d after %d", d.Name, m.name, v, last)
			}
			last = v
			want = append(want, fmtVersion(v, m.name))
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s: rendered %v, want %v", d.Name, names, want)
		}
		for _, n := range names {
			b, err := fs.ReadFile(fsys, n)
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			if !strings.Contains(s, "-- +goose Up") || !strings.Contains(s, "-- +goose Down") || strings.Contains(s, "{{") {
				t.Errorf("%s: %s is not a goose migration with Up and Down:\n%s", d.Name, n, s)
			}
		}
	}
	if b, _ := fs.ReadFile(mustRender(t, Postgres()), "00001_initial.sql"); !strings.Contains(string(b), "created_at          TIMESTAMPTZ NOT NULL") {
		t.Errorf("postgres initial migration does not use timestamptz:\n%s", b)
	}
}

func mustRender(t *testing.T, d *Dialect) fs.FS {
	fsys, err := RenderMigrations(d)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}
