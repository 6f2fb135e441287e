package sqlstore

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"testing/fstest"
	"text/template"
)

// migrationTemplates are the migrations, one template per change, named by
// content (see the package doc).
//
//go:embed migrations/*.sql
var migrationTemplates embed.FS

// migrationVersions lists the migrations in order: each template's version
// in SQLite and in PostgreSQL, 0 where that dialect does not carry it.
var migrationVersions = []migrationVersion{
	{"initial", 1, 1},
	{"ingress", 2, 2},
	{"runs_control", 3, 3},
	{"cluster_settings", 4, 4},
	{"provenance", 5, 5},
	{"security", 6, 6},
	{"contexts", 7, 7},
	{"approvals", 8, 8},
	{"context_concurrency", 9, 9},
	{"concurrency_strategy", 10, 10},
	{"blobs", 11, 11},
	{"workflow_data", 12, 12},
	{"check_run_tracking", 13, 13},
	{"schedule_fires", 14, 14},
	{"cluster_nodes", 15, 15},
	{"dispatch_queue_seq", 16, 0},
	{"step_logs", 0, 16},
	{"agent_sessions", 0, 17},
	{"delivery_claims", 17, 18},
	{"growing_table_indexes", 18, 19},
	{"single_node_agent_sessions", 19, 0},
	{"cluster_node_agents", 20, 20},
	{"workflow_origin", 21, 21},
	{"notifications", 22, 22},
	{"web_sessions", 23, 23},
	{"step_log_archive", 0, 24},
	{"toast_lz4", 0, 25},
	{"source_change_notify", 0, 26},
	{"node_log_forms", 24, 27},
	{"source_revision", 25, 0},
}

// migrationVersion is one template's version in each dialect.
type migrationVersion struct {
	name             string
	sqlite, postgres int64
}

// in is the migration's version in d, 0 if d does not carry it.
func (m migrationVersion) in(d *Dialect) int64 {
	if d.Postgres {
		return m.postgres
	}
	return m.sqlite
}

// migrationTypes are the values a migration template reads: the SQL
// spelling of each type or literal that differs between the dialects.
type migrationTypes struct {
	// Postgres selects PostgreSQL-only statements.
	Postgres bool
	// Time is a point in time: INTEGER Unix milliseconds / TIMESTAMPTZ.
	Time string
	// Int is a 64-bit integer: INTEGER / BIGINT.
	Int string
	// Bool is a boolean: INTEGER 0 or 1 / BOOLEAN.
	Bool string
	// True and False are Bool's literals: 1 and 0 / TRUE and FALSE.
	True, False string
	// JSON is a JSON document: TEXT / JSONB.
	JSON string
	// Bytes is a byte string: BLOB / BYTEA.
	Bytes string
	// Serial is an auto-numbered 64-bit primary key column's type and
	// constraint.
	Serial string
	// Concurrently is "CONCURRENTLY " on PostgreSQL, for CREATE/DROP
	// INDEX on a table that may be large: the build no longer blocks
	// writes (the migration must then be marked NO TRANSACTION, see
	// CONTRIBUTING.md); "" on SQLite.
	Concurrently string
}

var sqliteTypes = migrationTypes{
	Time: "INTEGER", Int: "INTEGER", Bool: "INTEGER", True: "1", False: "0",
	JSON: "TEXT", Bytes: "BLOB", Serial: "INTEGER PRIMARY KEY AUTOINCREMENT",
}

var postgresTypes = migrationTypes{
	Postgres: true,
	Time:     "TIMESTAMPTZ", Int: "BIGINT", Bool: "BOOLEAN", True: "TRUE", False: "FALSE",
	JSON: "JSONB", Bytes: "BYTEA", Serial: "BIGSERIAL PRIMARY KEY",
	Concurrently: "CONCURRENTLY ",
}

// RenderMigrations returns d's goose migrations: an in-memory file system
// with one file NNNNN_<name>.sql at its root per migration d carries. An
// error means a template is missing or does not render (a build defect).
func RenderMigrations(d *Dialect) (fs.FS, error) {
	types := sqliteTypes
	if d.Postgres {
		types = postgresTypes
	}
	out := fstest.MapFS{}
	for _, m := range migrationVersions {
		version := m.in(d)
		if version == 0 {
			continue
		}
		src, err := migrationTemplates.ReadFile("migrations/" + m.name + ".sql")
		if err != nil {
			return nil, fmt.Errorf("%s: migration %s: %w", d.Name, m.name, err)
		}
		tmpl, err := template.New(m.name).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("%s: migration %s: %w", d.Name, m.name, err)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, types); err != nil {
			return nil, fmt.Errorf("%s: migration %s: %w", d.Name, m.name, err)
		}
		out[fmtVersion(version, m.name)] = &fstest.MapFile{Data: b.Bytes(), Mode: 0o444}
	}
	return out, nil
}

// fmtVersion is the name goose reads a migration's version from.
func fmtVersion(version int64, name string) string {
	return fmt.Sprintf("%05d_%s.sql", version, name)
}
