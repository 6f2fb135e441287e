package sqlstore

import "context"

// Classes of the transaction-scoped advisory locks that serialise writers
// on PostgreSQL where no row exists yet to lock. SQLite needs none: its
// transactions begin IMMEDIATE and hold the database's write lock.
const (
	lockClassContext = 0x6b6301 // a context name of an org: hold creation vs context deletion
	lockClassTrust   = 0x6b6302 // an org's trust policy and approval directory
	lockClassSlots   = 0x6b6303 // a concurrency group's slots
)

// lock takes the advisory lock (class, key) until the transaction ends; a
// no-op on SQLite.
func (c conn) lock(ctx context.Context, class int, key string) error {
	if !c.d.Postgres {
		return nil
	}
	_, err := c.exec(ctx, `SELECT pg_advisory_xact_lock(?::int, hashtext(?))`, class, key)
	return err
}
