package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
)

// Migrations are a dialect's goose migrations (rendered from the shared
// templates, see RenderMigrations) bound to a database.
type Migrations struct {
	db *sql.DB
	d  *Dialect
	p  *goose.Provider
}

// NewMigrations binds d's goose migrations (RenderMigrations) to db.
func NewMigrations(db *sql.DB, d *Dialect) (*Migrations, error) {
	fsys, err := RenderMigrations(d)
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(d.Goose, db, fsys)
	if err != nil {
		return nil, fmt.Errorf("%s: migrations: %w", d.Name, err)
	}
	return &Migrations{db: db, d: d, p: p}, nil
}

// Up applies every pending migration.
func (m *Migrations) Up(ctx context.Context) error {
	if _, err := m.p.Up(ctx); err != nil {
		return fmt.Errorf("%s: migrate: %w", m.d.Name, err)
	}
	return nil
}

// DownTo rolls migrations back, newest first, until the schema is at
// version (0 = nothing left but goose's own version table).
func (m *Migrations) DownTo(ctx context.Context, version int64) error {
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
