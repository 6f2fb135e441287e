package storetest

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// updateSchema rewrites the schema golden files instead of comparing with
// them: go test ./internal/store/... -run TestSchemaMatchesGolden -update-schema.
var updateSchema = flag.Bool("update-schema", false, "rewrite testdata/schema.golden from the migrated database")

// schemaQueries dump what the migrations made, one row per line, in a
// stable order. SQLite keeps each object's CREATE statement verbatim;
// PostgreSQL is read from its catalogs: columns with type, default and
// nullability, indexes, constraints.
var schemaQueries = map[bool][]string{
	false: {`SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master ORDER BY name`},
	true: {
		`SELECT table_name, ordinal_position, column_name, data_type, COALESCE(column_default, ''), is_nullable
		 FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
		`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY tablename, indexname`,
		`SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) FROM pg_constraint
		 WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2`,
	},
}

// DumpSchema returns db's schema as text, whitespace collapsed to single
// spaces within each row (how a statement was laid out is not schema).
func DumpSchema(ctx context.Context, db *sql.DB, postgres bool) (string, error) {
	var b strings.Builder
	for _, q := range schemaQueries[postgres] {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return "", fmt.Errorf("dump schema: %w", err)
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return "", err
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return "", err
			}
			fields := make([]string, len(vals))
			for i, v := range vals {
				if by, ok := v.([]byte); ok {
					v = string(by)
				}
				fields[i] = strings.Join(strings.Fields(fmt.Sprint(v)), " ")
			}
			b.WriteString(strings.Join(fields, " | ") + "\n")
		}
		if err := rows.Close(); err != nil {
			return "", err
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// CheckSchemaGolden compares db's schema (DumpSchema) with
// testdata/schema.golden, the schema the migrations gave before they were
// rendered from shared templates; -update-schema rewrites the file.
func CheckSchemaGolden(t *testing.T, db *sql.DB, postgres bool) {
	t.Helper()
	got, err := DumpSchema(context.Background(), db, postgres)
	must(t, err)
	path := filepath.Join("testdata", "schema.golden")
	if *updateSchema {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	must(t, err)
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("schema differs from %s at line %d:\n got: %s\nwant: %s", path, i+1, g, w)
			}
		}
	}
}
