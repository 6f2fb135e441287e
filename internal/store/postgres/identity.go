package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Restored-copy detection. A `pg_dump` restore carries no marker the way a
// `kici-admin backup` SQLite copy does, but it always lands in another
// database: one created for the restore (a new oid in pg_database), often
// in another cluster (another system identifier, pg_control_system()).
// Neither is copied by a dump. So the database records its own identity in
// a row of its own; a start that finds the row naming another database is
// on a copy (a restore, or a copy or move of the database, which are
// treated alike) and applies the restore's safe start. Restarts of kici,
// failovers between nodes, PostgreSQL restarts and a promoted physical
// replica (same system identifier, same oids) keep the identity.

// identityTable holds the one row of the database's identity.
const identityTable = "kici_database_identity"

// SafeStartClaim is how long the node that found a restored copy has to
// finish the restore start before another node starting on the database
// takes it over (the first one crashed half-way). Within it, other nodes
// starting meanwhile leave the in-flight jobs to the first one.
const SafeStartClaim = 2 * time.Minute

// identityLockKey is the advisory lock serialising identity checks of
// nodes starting together (distinct from the migration lock's key).
const identityLockKey = 0x6b696369_1d

// Identity is what names a PostgreSQL database and is not copied by a
// dump: its oid in pg_database and its cluster's system identifier
// (pg_control_system().system_identifier; "" where the role may not read
// it, then only the oid is compared).
type Identity struct {
	DatabaseOID int64
	SystemID    string
}

// IdentityCheck is the outcome of CheckIdentity.
type IdentityCheck struct {
	// Current is this database's identity; Recorded the identity its row
	// named before this check (zero on a first record).
	Current, Recorded Identity
	// Copied is true when this check found the row naming another
	// database: this start is the first on a restored (or copied) one.
	Copied bool
	// SafeStartPending is true when this node is to apply the restore
	// start: it found the copy, or the node that found it did not finish
	// within SafeStartClaim (ClearSafeStart ends the claim).
	SafeStartPending bool
	// RestoredAt is when a copy was first detected (zero if never): no
	// schedule instant due before it is fired.
	RestoredAt time.Time
}

// same reports whether a and b are one database (system identifiers are
// compared only when both are known).
func (a Identity) same(b Identity) bool {
	if a.DatabaseOID != b.DatabaseOID {
		return false
	}
	return a.SystemID == "" || b.SystemID == "" || a.SystemID == b.SystemID
}

// currentIdentity reads db's identity.
func currentIdentity(ctx context.Context, db *sql.DB) (Identity, error) {
	var id Identity
	if err := db.QueryRowContext(ctx, "SELECT oid::bigint FROM pg_database WHERE datname = current_database()").Scan(&id.DatabaseOID); err != nil {
		return id, fmt.Errorf("read the database's oid: %w", err)
	}
	// Allowed to superusers and pg_monitor members on some versions:
	// without it the oid alone decides.
	var sys sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&sys); err == nil {
		id.SystemID = sys.String
	}
	return id, nil
}

// CheckIdentity compares db's identity with the one it recorded (creating
// the record on the first start) and, on a mismatch, records the new
// identity with the safe start pending. Nodes starting together are
// serialised by an advisory transaction lock: one of them finds the copy.
func CheckIdentity(ctx context.Context, db *sql.DB) (IdentityCheck, error) {
	var c IdentityCheck
	cur, err := currentIdentity(ctx, db)
	if err != nil {
		return c, err
	}
	c.Current = cur
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return c, err
	}
	defer func() { _ = tx.Rollback() }() // after Commit it only returns sql.ErrTxDone
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(identityLockKey)); err != nil {
		return c, fmt.Errorf("identity lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+identityTable+` (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		database_oid BIGINT NOT NULL,
		system_identifier TEXT NOT NULL,
		recorded_at TIMESTAMPTZ NOT NULL,
		restored_at TIMESTAMPTZ,
		safe_start_pending BOOLEAN NOT NULL DEFAULT FALSE,
		safe_start_claimed_at TIMESTAMPTZ)`); err != nil {
		return c, fmt.Errorf("create %s: %w", identityTable, err)
	}
	var restoredAt sql.NullTime
	var pending, claimExpired bool
	err = tx.QueryRowContext(ctx, `SELECT database_oid, system_identifier, restored_at, safe_start_pending,
		COALESCE(safe_start_claimed_at < now() - make_interval(secs => $1), TRUE) FROM `+identityTable+` WHERE id = 1`, SafeStartClaim.Seconds()).
		Scan(&c.Recorded.DatabaseOID, &c.Recorded.SystemID, &restoredAt, &pending, &claimExpired)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, "INSERT INTO "+identityTable+" (id, database_oid, system_identifier, recorded_at) VALUES (1, $1, $2, now())", cur.DatabaseOID, cur.SystemID)
		if err == nil {
			err = tx.Commit()
		}
		return c, err
	case err != nil:
		return c, fmt.Errorf("read %s: %w", identityTable, err)
	}
	if restoredAt.Valid {
		c.RestoredAt = restoredAt.Time.UTC()
	}
	if cur.same(c.Recorded) {
		if cur.SystemID != "" && c.Recorded.SystemID == "" {
			// Readable now (a role granted pg_monitor): keep it.
			_, err = tx.ExecContext(ctx, "UPDATE "+identityTable+" SET system_identifier = $1 WHERE id = 1", cur.SystemID)
		}
		if err == nil && pending && claimExpired {
			// The node that found the copy did not finish: take over.
			c.SafeStartPending = true
			_, err = tx.ExecContext(ctx, "UPDATE "+identityTable+" SET safe_start_claimed_at = now() WHERE id = 1")
		}
		if err == nil {
			err = tx.Commit()
		}
		return c, err
	}
	c.Copied, c.SafeStartPending = true, true
	if err := tx.QueryRowContext(ctx, `UPDATE `+identityTable+` SET database_oid = $1, system_identifier = $2, recorded_at = now(),
		restored_at = now(), safe_start_pending = TRUE, safe_start_claimed_at = now() WHERE id = 1 RETURNING restored_at`, cur.DatabaseOID, cur.SystemID).Scan(&restoredAt); err != nil {
		return c, fmt.Errorf("record the restored database's identity: %w", err)
	}
	c.RestoredAt = restoredAt.Time.UTC()
	return c, tx.Commit()
}

// ClearSafeStart records that the restore's safe start is done: later
// starts are ordinary ones.
func ClearSafeStart(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, "UPDATE "+identityTable+" SET safe_start_pending = FALSE, safe_start_claimed_at = NULL WHERE id = 1")
	return err
}
