package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// MigrationLockID is the PostgreSQL advisory lock key every node takes for
// the whole of a migration run (pg_try_advisory_lock, session level): the
// first node starting on an empty or older database migrates, the others
// wait and then find nothing left to do. The key is kici's own, so another
// goose-managed application sharing the database never waits on it.
const MigrationLockID int64 = 0x6b696369_6d696772 // "kicimigr"

// MigrationLockWait bounds how long a node waits for another node's
// migration run (polling once a second) before its start fails.
const MigrationLockWait = 10 * 60 // seconds

// Migrations are a dialect's goose migrations (rendered from the shared
// templates, see RenderMigrations) bound to a database.
type Migrations struct {
	db         *sql.DB
	d          *Dialect
	p          *goose.Provider
	beforeDown []downHook
}

// downHook is work DownTo does before the Down migration of version runs
// (BeforeDown).
type downHook struct {
	version int64
	fn      func(ctx context.Context, db *sql.DB) error
}

// NodeLogFormsMigration names the migration after which the chunks a node
// writes to step_log_chunks may be compressed (node_log_forms.sql): a
// rollback below it first rewrites them plain (logstore.PlainChunks).
const NodeLogFormsMigration = "node_log_forms"

// NewMigrations binds d's goose migrations (RenderMigrations) to db.
func NewMigrations(db *sql.DB, d *Dialect) (*Migrations, error) {
	fsys, err := RenderMigrations(d)
	if err != nil {
		return nil, err
	}
	var opts []goose.ProviderOption
	if d.Postgres {
		// Nodes starting together on one database: without the lock each
		// ran the first migration at once and all but one crashed on
		// duplicate catalog rows. SQLite is one node's file, locked by
		// its data directory.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(MigrationLockID), lock.WithLockTimeout(1, MigrationLockWait))
		if err != nil {
			return nil, fmt.Errorf("%s: migration lock: %w", d.Name, err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(d.Goose, db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: migrations: %w", d.Name, err)
	}
	return &Migrations{db: db, d: d, p: p}, nil
}

// Up applies every pending migration, under the migration lock on
// PostgreSQL (MigrationLockID). A database whose schema is newer than this
// binary's migrations is refused with a *SchemaNewerError and not changed.
func (m *Migrations) Up(ctx context.Context) error {
	if err := m.refuseNewer(ctx); err != nil {
		return err
	}
	if _, err := m.p.Up(ctx); err != nil {
		return fmt.Errorf("%s: migrate: %w", m.d.Name, err)
	}
	return nil
}

// VersionOf is the version of the named migration template in this
// dialect (migrationVersions), 0 when the dialect does not carry it.
func (m *Migrations) VersionOf(name string) int64 {
	for _, v := range migrationVersions {
		if v.name == name {
			return v.in(m.d)
		}
	}
	return 0
}

// BeforeDown registers fn to run when DownTo rolls the schema from version
// or later to below it, before any Down migration runs: data a Down
// migration cannot rewrite in SQL, such as the compressed step-log chunks
// an older release cannot read. fn must be safe to run again: a
// down-to that failed half-way is run again. version 0 (a migration the
// dialect does not carry) registers nothing.
func (m *Migrations) BeforeDown(version int64, fn func(ctx context.Context, db *sql.DB) error) {
	if version > 0 {
		m.beforeDown = append(m.beforeDown, downHook{version, fn})
	}
}

// DownTo rolls migrations back, newest first, until the schema is at
// version (0 = nothing left but goose's own version table), after the
// BeforeDown work of every migration it rolls back.
func (m *Migrations) DownTo(ctx context.Context, version int64) error {
	have, err := m.Current(ctx)
	if err != nil {
		return err
	}
	for _, h := range m.beforeDown {
		if version < h.version && h.version <= have {
			if err := h.fn(ctx, m.db); err != nil {
				return fmt.Errorf("%s: migrate down to %d: before rolling back version %d: %w", m.d.Name, version, h.version, err)
			}
		}
	}
	if _, err := m.p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("%s: migrate down to %d: %w", m.d.Name, version, err)
	}
	return nil
}

// Expected is the version of the newest migration this binary carries.
func (m *Migrations) Expected() int64 {
	src := m.p.ListSources()
	if len(src) == 0 {
		return 0
	}
	return src[len(src)-1].Version
}

// Current reads the schema version of the database without changing it:
// 0 for a database goose never touched (no version table).
func (m *Migrations) Current(ctx context.Context) (int64, error) {
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`
	if m.d.Postgres {
		q = `SELECT count(*) FROM pg_tables WHERE tablename = 'goose_db_version' AND schemaname = ANY(current_schemas(false))`
	}
	var n int
	if err := m.db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: read schema version: %w", m.d.Name, err)
	}
	if n == 0 {
		return 0, nil
	}
	v, err := m.p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: read schema version: %w", m.d.Name, err)
	}
	return v, nil
}

// refuseNewer returns a *SchemaNewerError when the database is at a version
// this binary does not carry.
func (m *Migrations) refuseNewer(ctx context.Context) error {
	have, err := m.Current(ctx)
	if err != nil {
		return err
	}
	if want := m.Expected(); have > want {
		return &SchemaNewerError{Have: have, Want: want, Dialect: m.d.Name}
	}
	return nil
}

// SchemaNewerError is returned by Up when the database was migrated by a
// newer release than this binary: running on it could write rows the newer
// release does not expect, so the binary stops and says what to do
// (docs/upgrade.md).
type SchemaNewerError struct {
	Have, Want int64
	Dialect    string
}

// Error names both versions and the operator's two ways out.
func (e *SchemaNewerError) Error() string {
	return fmt.Sprintf("%s: the database schema is at version %d, newer than this binary's %d: it was migrated by a newer kici release. "+
		"Run that newer release, or roll the schema back first with the newer release's "+
		"`kici-orchestrator migrate down-to %d` with the same KICI_DATABASE_URL (docs/upgrade.md)", e.Dialect, e.Have, e.Want, e.Want)
}

// SchemaMismatchError is returned by CheckVersion when the database's
// schema is not the one this binary was built for.
type SchemaMismatchError struct {
	Have, Want int64
}

// Error implements error.
func (e *SchemaMismatchError) Error() string {
	return fmt.Sprintf("schema is at %d, expected %d", e.Have, e.Want)
}

// CheckVersion returns a *SchemaMismatchError unless the database's schema
// is exactly at Expected; it never migrates.
func (m *Migrations) CheckVersion(ctx context.Context) error {
	have, err := m.Current(ctx)
	if err != nil {
		return err
	}
	if want := m.Expected(); have != want {
		return &SchemaMismatchError{Have: have, Want: want}
	}
	return nil
}

// Tables lists the database's tables in the store's schema (goose's version
// table included), sorted; for diagnostics and the migration tests.
func (m *Migrations) Tables(ctx context.Context) ([]string, error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	if m.d.Postgres {
		q = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`
	}
	rows, err := m.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s: list tables: %w", m.d.Name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// SchemaVersion reads the database's schema version (goose's newest
// applied migration) in one short query; readiness probes use it as their
// database round trip. An error means the database did not answer (or has
// no version table).
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("%s: read schema version: %w", s.d.Name, err)
	}
	return v.Int64, nil
}

// ExpectedSchemaVersion is the version of the newest migration this binary
// carries for the store's dialect (what Migrations.Expected reports,
// without rendering the migrations).
func (s *Store) ExpectedSchemaVersion() int64 {
	var v int64
	for _, m := range migrationVersions {
		if n := m.in(s.d); n > v {
			v = n
		}
	}
	return v
}
