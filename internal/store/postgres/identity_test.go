package postgres_test

import (
	"context"
	"testing"

	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
)

// The first start records the database's identity; later starts on the
// same database are ordinary; a start that finds the row naming another
// database (what a pg_dump restore into a new database carries) is a copy:
// that node applies the safe start, a node starting meanwhile does not,
// one starting after an unfinished claim takes it over; restoredAt stays.
func TestCheckIdentityTellsACopyFromARestart(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	first, err := postgres.CheckIdentity(ctx, db)
	if err != nil || first.Copied || first.SafeStartPending || first.Current.DatabaseOID == 0 {
		t.Fatalf("first start: %+v %v; want recorded, no copy", first, err)
	}
	again, err := postgres.CheckIdentity(ctx, db)
	if err != nil || again.Copied || again.SafeStartPending || !again.RestoredAt.IsZero() {
		t.Fatalf("restart: %+v %v; want ordinary", again, err)
	}
	// What the dump of another database carries: its oid.
	if _, err := db.ExecContext(ctx, "UPDATE kici_database_identity SET database_oid = database_oid + 1"); err != nil {
		t.Fatal(err)
	}
	copied, err := postgres.CheckIdentity(ctx, db)
	if err != nil || !copied.Copied || !copied.SafeStartPending || copied.RestoredAt.IsZero() {
		t.Fatalf("start on a copy: %+v %v; want copied, safe start pending", copied, err)
	}
	// Another node starting while the first applies the restore start
	// leaves it to that node.
	other, err := postgres.CheckIdentity(ctx, db)
	if err != nil || other.Copied || other.SafeStartPending || !other.RestoredAt.Equal(copied.RestoredAt) {
		t.Fatalf("a second node during the restore start: %+v %v; want no copy, nothing to apply, restoredAt kept", other, err)
	}
	// The first node died before finishing: after the claim a start takes
	// the restore start over.
	if _, err := db.ExecContext(ctx, "UPDATE kici_database_identity SET safe_start_claimed_at = now() - interval '3 minutes'"); err != nil {
		t.Fatal(err)
	}
	pending, err := postgres.CheckIdentity(ctx, db)
	if err != nil || pending.Copied || !pending.SafeStartPending {
		t.Fatalf("start after an unfinished restore start: %+v %v; want it taken over, no new copy", pending, err)
	}
	if err := postgres.ClearSafeStart(ctx, db); err != nil {
		t.Fatal(err)
	}
	after, err := postgres.CheckIdentity(ctx, db)
	if err != nil || after.Copied || after.SafeStartPending || !after.RestoredAt.Equal(copied.RestoredAt) {
		t.Fatalf("after the safe start: %+v %v; want ordinary, restoredAt %v kept", after, err, copied.RestoredAt)
	}
}
