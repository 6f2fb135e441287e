package sqlstore

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
)

// Dialect is what differs between the SQL engines the store runs on. Every
// query is written once in a portable form and rebound per dialect:
//
//   - placeholders are "?" (numbered in order) or "?N" (explicit, reusable);
//     PostgreSQL gets "$N", SQLite keeps them as they are. One query uses
//     one form, never both.
//   - PostgreSQL casts "::type" (needed where PostgreSQL cannot infer a
//     parameter's type, or to read jsonb as text) are removed for SQLite,
//     which has no such syntax and needs none.
//
// Quoted string literals are copied untouched. The few statements that
// truly differ (claims with FOR UPDATE SKIP LOCKED, JSON containment,
// sequence numbers) are chosen with the Postgres field.
type Dialect struct {
	// Name is the engine's name, used in error messages ("sqlite",
	// "postgres").
	Name string
	// Postgres is true for PostgreSQL: "$N" placeholders, timestamptz times,
	// row locks; false for SQLite: "?" placeholders, INTEGER Unix
	// milliseconds, database-level write lock.
	Postgres bool
	// Goose is the goose dialect the migrations are written for.
	Goose goose.Dialect

	cache sync.Map // portable query -> rebound query
}

// SQLite is the dialect of modernc.org/sqlite databases.
func SQLite() *Dialect { return &Dialect{Name: "sqlite", Goose: goose.DialectSQLite3} }

// Postgres is the dialect of PostgreSQL databases reached through pgx's
// database/sql driver.
func Postgres() *Dialect {
	return &Dialect{Name: "postgres", Postgres: true, Goose: goose.DialectPostgres}
}

// rebind returns q in the dialect's syntax (see Dialect), cached.
func (d *Dialect) rebind(q string) string {
	if v, ok := d.cache.Load(q); ok {
		return v.(string)
	}
	out := d.rewrite(q)
	d.cache.Store(q, out)
	return out
}

func (d *Dialect) rewrite(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	next := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(q[i+1:], '\'')
			if j < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+j+2])
			i += j + 1
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			num := q[i+1 : j]
			if num == "" {
				next++
				num = strconv.Itoa(next)
				if !d.Postgres {
					num = ""
				}
			}
			if d.Postgres {
				b.WriteString("$" + num)
			} else {
				b.WriteString("?" + num)
			}
			i = j - 1
		case c == ':' && i+1 < len(q) && q[i+1] == ':' && !d.Postgres:
			j := i + 2
			for j < len(q) && (isIdent(q[j]) || q[j] == '[' || q[j] == ']') {
				j++
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ts is the stored form of a time: Unix milliseconds (int64) on SQLite, a
// UTC time truncated to the millisecond on PostgreSQL (timestamptz).
func (d *Dialect) ts(t time.Time) any {
	if d.Postgres {
		return t.UTC().Truncate(time.Millisecond)
	}
	return t.UnixMilli()
}

// tsPtr is ts for an optional time: nil stays SQL NULL.
func (d *Dialect) tsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.ts(*t)
}

// forUpdate is the row-lock suffix of a SELECT inside a transaction. SQLite
// needs none: its transactions begin IMMEDIATE and hold the database's
// write lock.
func (d *Dialect) forUpdate() string {
	if d.Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// jsonArrayHas is a condition "the JSON array in column col has the string
// bound to placeholder ph".
func (d *Dialect) jsonArrayHas(col, ph string) string {
	if d.Postgres {
		return col + "::jsonb @> jsonb_build_array(" + ph + "::text)"
	}
	return "EXISTS (SELECT 1 FROM json_each(" + col + ") WHERE value = " + ph + ")"
}

// skipLocked is the suffix of a sub-select that picks a batch to delete:
// on PostgreSQL it skips rows other transactions hold.
func (d *Dialect) skipLocked() string {
	if d.Postgres {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// rowID names the physical row identifier, for tables without a key.
func (d *Dialect) rowID() string {
	if d.Postgres {
		return "ctid"
	}
	return "rowid"
}

// strpos names the function giving the 1-based position of a substring
// (0 when absent).
func (d *Dialect) strpos() string {
	if d.Postgres {
		return "strpos"
	}
	return "instr"
}
