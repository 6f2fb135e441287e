package sqlstore

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// concurrentIndexesSince is the first PostgreSQL migration under the index
// policy of CONTRIBUTING.md: earlier ones ran on small, young tables and a
// deployed migration is never rewritten for style.
const concurrentIndexesSince = 19

var (
	createTableRe = regexp.MustCompile(`(?i)CREATE TABLE (?:IF NOT EXISTS )?(\w+)`)
	indexStmtRe   = regexp.MustCompile(`(?i)(CREATE (?:UNIQUE )?INDEX|DROP INDEX)\s+(CONCURRENTLY\s+)?(?:IF (?:NOT )?EXISTS\s+)?(\w+)(?:\s+ON\s+(\w+))?`)
)

// From version 19 on, a PostgreSQL migration that builds or drops an index
// on a table it did not create itself does so CONCURRENTLY and runs
// outside a transaction (-- +goose NO TRANSACTION): a plain CREATE INDEX
// holds a lock that blocks every write to the table for the whole build.
func TestPostgresIndexesOnExistingTablesAreConcurrent(t *testing.T) {
	fsys := mustRender(t, Postgres())
	for _, m := range migrationVersions {
		if m.postgres < concurrentIndexesSince {
			continue
		}
		body, err := fs.ReadFile(fsys, fmtVersion(m.postgres, m.name))
		if err != nil {
			t.Fatal(err)
		}
		src := string(body)
		up, _, _ := strings.Cut(src[strings.Index(src, "-- +goose Up"):], "-- +goose Down")
		created := map[string]bool{}
		for _, c := range createTableRe.FindAllStringSubmatch(up, -1) {
			created[strings.ToLower(c[1])] = true
		}
		concurrent := false
		for _, s := range indexStmtRe.FindAllStringSubmatch(src, -1) {
			table := strings.ToLower(s[4])
			if strings.HasPrefix(strings.ToUpper(s[1]), "CREATE") && created[table] {
				continue // a new, empty table: nothing to block
			}
			if s[2] == "" {
				t.Errorf("%s: %q on an existing table is not CONCURRENTLY", m.name, strings.TrimSpace(s[0]))
			}
			concurrent = true
		}
		if concurrent && !strings.Contains(src, "-- +goose NO TRANSACTION") {
			t.Errorf("%s builds indexes CONCURRENTLY but is not marked -- +goose NO TRANSACTION", m.name)
		}
	}
}
