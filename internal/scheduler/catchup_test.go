package scheduler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

// A graceful stop releases the lease: another scheduler leads at its very
// next tick (no wait for the TTL) and catches up the instant due during the
// handover; an instant fired by the first is not fired again.
func TestReleasedLeaseIsTakenAtOnceAndCaughtUp(t *testing.T) {
	st := teststore.SQLite(t)
	register(t, st, "tenner", "@every 10s", "", utc("2026-01-01T00:00:00Z"))
	c := &clock{t: utc("2026-01-05T10:00:01Z")}
	rec := &recorder{fired: map[string]*ingest.InternalEvent{}}
	a, b := New(st, rec.emit, nil), New(st, rec.emit, nil)
	a.Now, b.Now = c.now, c.now
	a.LeaseTTL, b.LeaseTTL = time.Hour, time.Hour
	a.Tick = time.Hour // the Start loop ticks once, then waits
	ctx := context.Background()
	a.Start(ctx)
	wait.Until(5*time.Second, func() bool { return len(rec.times()) > 0 })
	if got := rec.times(); !slices.Equal(got, []string{"2026-01-05T10:00:00Z"}) {
		t.Fatalf("a fired %v, want 10:00:00", got)
	}
	a.Release(ctx)
	c.set(utc("2026-01-05T10:00:12Z"))
	if err := b.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if !b.leading {
		t.Fatal("b did not take the released lease at once")
	}
	c.set(utc("2026-01-05T10:00:21Z"))
	if err := b.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-01-05T10:00:00Z", "2026-01-05T10:00:10Z", "2026-01-05T10:00:20Z"}
	if got := rec.times(); !slices.Equal(got, want) {
		t.Fatalf("fired %v, want each instant once: %v", got, want)
	}
	if m := missedMessages(t, st); len(m) != 0 {
		t.Fatalf("missed %q, want none", m)
	}
}

// A leader taking over after a gap longer than the catch-up window fires
// nothing older than the window and records every instant it skipped.
func TestCatchUpWindowBoundsTakeover(t *testing.T) {
	st := teststore.SQLite(t)
	register(t, st, "hourly", "@hourly", "", utc("2026-01-01T00:00:00Z"))
	c := &clock{t: utc("2026-01-05T10:00:30Z")}
	rec := &recorder{fired: map[string]*ingest.InternalEvent{}}
	a, b := New(st, rec.emit, nil), New(st, rec.emit, nil)
	a.Now, b.Now = c.now, c.now
	b.CatchUpWindow = 30 * time.Minute
	ctx := context.Background()
	if err := a.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	a.Release(ctx)
	// 13:45: 11:00, 12:00 and 13:00 fell due; 13:00 is 45 min old, past
	// b's 30-minute window.
	c.set(utc("2026-01-05T13:45:00Z"))
	if err := b.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.times(); !slices.Equal(got, []string{"2026-01-05T10:00:00Z"}) {
		t.Fatalf("fired %v, want only a's 10:00 (nothing within b's window)", got)
	}
	if m := missedMessages(t, st); len(m) != 1 || !strings.Contains(m[0], "3 instant(s)") || !strings.Contains(m[0], "30m0s") {
		t.Fatalf("missed %q, want one entry for 11:00, 12:00 and 13:00", m)
	}
	c.set(utc("2026-01-05T14:00:01Z"))
	if err := b.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.times(); len(got) != 2 || got[1] != "2026-01-05T14:00:00Z" {
		t.Fatalf("fired %v, want 14:00 next", got)
	}
}

// A push to the default branch re-registers the workflows between an
// instant and a takeover: the new leader still fires that instant (it
// starts after the last recorded fire, not after the re-registration).
func TestTakeoverAfterReRegistrationFiresTheInstantBetween(t *testing.T) {
	st := teststore.SQLite(t)
	register(t, st, "fiver", "@every 5s", "", utc("2026-01-01T00:00:00Z"))
	c := &clock{t: utc("2026-01-05T10:00:11Z")}
	rec := &recorder{fired: map[string]*ingest.InternalEvent{}}
	a, b := New(st, rec.emit, nil), New(st, rec.emit, nil)
	a.Now, b.Now = c.now, c.now
	ctx := context.Background()
	if err := a.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	a.Release(ctx)
	// 10:00:15 falls due; a push re-registers at 10:00:15.5; b takes over.
	register(t, st, "fiver", "@every 5s", "", utc("2026-01-05T10:00:15.5Z"))
	c.set(utc("2026-01-05T10:00:16Z"))
	if err := b.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-01-05T10:00:10Z", "2026-01-05T10:00:15Z"}
	if got := rec.times(); !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if m := missedMessages(t, st); len(m) != 0 {
		t.Fatalf("missed %q, want none", m)
	}
}
