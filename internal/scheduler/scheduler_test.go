package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func register(t *testing.T, st store.Store, name, cron, tz string, at time.Time) {
	t.Helper()
	wf := `{"name":"` + name + `","source":{"file":"x","export":"#default"},"contentHash":"x","compileSchemaVersion":5,` +
		`"triggers":[{"_type":"push"},{"_type":"schedule","cronExpression":"` + cron + `","timezone":"` + tz + `"}],` +
		`"jobs":[{"_type":"static","name":"build","runsOn":[{"kind":"exact","value":"nowhere"}],"needs":[],"steps":[{"name":"s","run":"true"}]}]}`
	// The scheduler fires only for an existing, enabled source.
	if _, err := st.GetSource(context.Background(), "src"); errors.Is(err, store.ErrNotFound) {
		if err := st.CreateSource(context.Background(), &store.Source{ID: "src", OrgID: "acme", Name: "app", Provider: provider.Local, Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.ReplaceRegistrations(context.Background(), "src", "acme/"+name, []*store.Registration{{OrgID: "acme", RoutingKey: "rk",
		Provider: provider.Local, WorkflowName: name, TriggerTypes: []string{"push", "schedule"}, Workflow: json.RawMessage(wf), SHA: "abc", CreatedAt: at}}); err != nil {
		t.Fatal(err)
	}
}

type recorder struct {
	mu    sync.Mutex
	fired map[string]*ingest.InternalEvent
}

func (r *recorder) emit(ctx context.Context, id, org string, ie *ingest.InternalEvent) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.fired[id]; dup {
		return true, nil
	}
	r.fired[id] = ie
	return false, nil
}

func (r *recorder) times() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ie := range r.fired {
		out = append(out, ie.ScheduledAt)
	}
	sort.Strings(out)
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Each due instant fires once, in the trigger's timezone; instants before
// the scheduler started are not backfilled; after a pause only the latest
// missed instant fires.
func TestFiresEachDueInstantOnceInTimezone(t *testing.T) {
	st := teststore.SQLite(t)
	c := &clock{t: utc("2026-01-05T07:58:30Z")}
	register(t, st, "nightly", "0 9 * * *", "Europe/Paris", utc("2026-01-01T00:00:00Z")) // 09:00 Paris = 08:00 UTC in winter
	register(t, st, "quarter", "*/15 * * * *", "", utc("2026-01-01T00:00:00Z"))
	rec := &recorder{fired: map[string]*ingest.InternalEvent{}}
	s := New(st, rec.emit, nil)
	s.Now = c.now
	ctx := context.Background()
	tick := func(at string) {
		t.Helper()
		c.set(utc(at))
		if err := s.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Start with no fire recorded: the latest instant within the catch-up
	// window (quarter's 07:45) fires; yesterday's nightly is too old.
	tick("2026-01-05T07:58:30Z")
	if got := rec.times(); len(got) != 1 || got[0] != "2026-01-05T07:45:00Z" {
		t.Fatalf("fired %v at start, want only quarter's 07:45 (within the 1 h window)", got)
	}
	tick("2026-01-05T08:00:05Z")
	tick("2026-01-05T08:00:15Z") // same instant again: no second fire
	want := []string{"2026-01-05T07:45:00Z", "2026-01-05T08:00:00Z", "2026-01-05T08:00:00Z"}
	if got := rec.times(); !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v (nightly at 09:00 Paris, quarter at :00)", got, want)
	}
	// A 50-minute stall: quarter's 08:15, 08:30 and 08:45 are due; the
	// latest fires, the two others are recorded missed.
	tick("2026-01-05T08:50:00Z")
	got := rec.times()
	if len(got) != 4 || got[3] != "2026-01-05T08:45:00Z" {
		t.Fatalf("after a pause fired %v, want only 08:45 added", got)
	}
	if m := missedMessages(t, st); len(m) != 1 || !strings.Contains(m[0], "2 instant(s)") || !strings.Contains(m[0], "*/15") {
		t.Fatalf("missed entries %q, want one for quarter's 08:15 and 08:30", m)
	}
	for id, ie := range rec.fired {
		if ie.Kind != ingest.KindSchedule || ie.TargetRepo == "" || ie.TargetWorkflow == "" || ie.RegistrationID == "" {
			t.Fatalf("event %s = %+v", id, ie)
		}
		if ie.TargetWorkflow == "nightly" && (ie.Timezone != "Europe/Paris" || ie.CronExpression != "0 9 * * *") {
			t.Fatalf("nightly event = %+v", ie)
		}
	}
}

// Only the lease holder fires; the other takes over after the lease
// expires, firing the latest instant due meanwhile once and recording the
// older one missed.
func TestSingleSchedulerAcrossInstances(t *testing.T) {
	st := teststore.SQLite(t)
	register(t, st, "minutely", "* * * * *", "UTC", utc("2026-01-01T00:00:00Z"))
	c := &clock{t: utc("2026-01-05T10:00:30Z")}
	rec := &recorder{fired: map[string]*ingest.InternalEvent{}}
	a, b := New(st, rec.emit, nil), New(st, rec.emit, nil)
	a.Now, b.Now = c.now, c.now
	// A lease long enough that a's tick, SQLite writes and all, ends well
	// inside it on a starved machine; b then waits out what is left.
	a.LeaseTTL, b.LeaseTTL = 2*time.Second, 2*time.Second
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.TickOnce(ctx))
	must(b.TickOnce(ctx))
	if !a.leading || b.leading {
		t.Fatalf("leading: a=%v b=%v; want only a", a.leading, b.leading)
	}
	c.set(utc("2026-01-05T10:01:05Z"))
	must(a.TickOnce(ctx))
	must(b.TickOnce(ctx))
	if got := rec.times(); !slices.Equal(got, []string{"2026-01-05T10:00:00Z", "2026-01-05T10:01:00Z"}) {
		t.Fatalf("fired %v, want 10:00 (caught up at start) and 10:01, once each", got)
	}
	// a stops ticking; its lease expires; b takes over from now on.
	c.set(utc("2026-01-05T10:03:10Z"))
	wait.For(t, 10*time.Second, "b takes a's lease once the wall clock is past it", func() bool {
		must(b.TickOnce(ctx))
		return b.leading
	})
	c.set(utc("2026-01-05T10:04:02Z"))
	must(b.TickOnce(ctx))
	want := []string{"2026-01-05T10:00:00Z", "2026-01-05T10:01:00Z", "2026-01-05T10:03:00Z", "2026-01-05T10:04:00Z"}
	if got := rec.times(); !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v (10:03, the latest instant due with no leader, caught up once)", got, want)
	}
	if m := missedMessages(t, st); len(m) != 1 || !strings.Contains(m[0], "1 instant(s)") {
		t.Fatalf("missed entries %q, want one for 10:02", m)
	}
}

func TestParseErrorsAndImpossibleCron(t *testing.T) {
	if _, err := Parse("0 9 * * *", "Mars/Olympus"); err == nil {
		t.Fatal("unknown zone accepted")
	}
	if _, err := Parse("61 * * * *", ""); err == nil {
		t.Fatal("minute 61 accepted")
	}
	every, err := Parse("@every 5m", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := every.Latest(utc("2026-01-05T10:01:00Z"), utc("2026-01-05T10:04:59Z")); !got.IsZero() {
		t.Fatalf("@every 5m fired at %v between 10:01 and 10:04:59", got)
	}
	if got := every.Latest(utc("2026-01-05T10:04:50Z"), utc("2026-01-05T10:05:01Z")); !got.Equal(utc("2026-01-05T10:05:00Z")) {
		t.Fatalf("@every 5m: %v, want 10:05", got)
	}
	sc, err := Parse("0 0 30 2 *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.Latest(utc("2026-01-01T00:00:00Z"), utc("2030-01-01T00:00:00Z")); !got.IsZero() {
		t.Fatalf("30 February fired at %v", got)
	}
}

// A fire, through the real pipeline, starts a run of that registration
// only, at the registered commit, and a second fire of the same instant
// (another scheduler) starts nothing.
func TestScheduleFireCreatesRun(t *testing.T) {
	st := teststore.SQLite(t)
	ctx := context.Background()
	if err := st.CreateSource(ctx, &store.Source{ID: "src", OrgID: "acme", Name: "app", Provider: provider.Local, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	register(t, st, "nightly", "0 3 * * *", "UTC", utc("2026-01-01T00:00:00Z"))
	register(t, st, "other", "0 3 * * *", "UTC", utc("2026-01-01T00:00:00Z"))
	proc := ingest.NewProcessor(st, runs.NewTracker(st, nopEnqueuer{}, nil, runs.TrackerDeps{}), nil, ingest.ProcessorDeps{})
	c := &clock{t: utc("2026-01-05T02:59:00Z")}
	var ids []string
	emit := func(ctx context.Context, id, org string, ie *ingest.InternalEvent) (bool, error) {
		ids = append(ids, id)
		return proc.Emit(ctx, id, org, ie)
	}
	s1, s2 := New(st, emit, nil), New(st, emit, nil)
	s1.Now, s2.Now = c.now, c.now
	if err := s1.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	c.set(utc("2026-01-05T03:00:01Z"))
	if err := s1.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("fires = %v, want one per registration", ids)
	}
	// A second scheduler firing the same instant (e.g. across a lease
	// handover) is a duplicate.
	if dup, err := proc.Emit(ctx, ids[0], "acme", &ingest.InternalEvent{Kind: ingest.KindSchedule}); err != nil || !dup {
		t.Fatalf("re-fire: dup %v err %v", dup, err)
	}
	for _, id := range ids {
		if err := proc.Process(ctx, id); err != nil {
			t.Fatal(err)
		}
		runs, _, _ := st.ListRuns(ctx, store.RunFilter{DeliveryID: id})
		if len(runs) != 1 || runs[0].SHA != "abc" || runs[0].TriggeredBy != "kici:schedule" {
			t.Fatalf("runs of %s = %+v, want one run at the registered commit", id, runs)
		}
	}
	all, n, _ := st.ListRuns(ctx, store.RunFilter{})
	if n != 2 || all[0].RepoIdentifier == all[1].RepoIdentifier {
		t.Fatalf("runs = %d, want one per registration", n)
	}
}

type nopEnqueuer struct{}

func (nopEnqueuer) EnqueueJob(context.Context, *store.Job) error { return nil }

// A paused source's schedules do not fire, resuming it does not backfill
// what fell due while paused, and a deleted source's schedules stop.
func TestPausedAndDeletedSourcesDoNotFire(t *testing.T) {
	st := teststore.SQLite(t)
	ctx := context.Background()
	register(t, st, "quarter", "*/15 * * * *", "", utc("2026-01-01T00:00:00Z"))
	rec := &recorder{fired: map[string]*ingest.InternalEvent{}}
	c := &clock{}
	s := New(st, rec.emit, nil)
	s.Now = c.now
	tick := func(at string) {
		t.Helper()
		c.set(utc(at))
		if err := s.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tick("2026-01-05T07:58:30Z")
	tick("2026-01-05T08:00:05Z")
	if got := rec.times(); len(got) != 2 || got[1] != "2026-01-05T08:00:00Z" {
		t.Fatalf("enabled source fired %v, want 07:45 (caught up at start) and 08:00", got)
	}
	if err := st.SetSourceEnabled(ctx, "src", false); err != nil {
		t.Fatal(err)
	}
	tick("2026-01-05T08:15:05Z")
	tick("2026-01-05T08:30:05Z")
	if got := rec.times(); len(got) != 2 {
		t.Fatalf("paused source fired %v, want nothing after 08:00", got)
	}
	if err := st.SetSourceEnabled(ctx, "src", true); err != nil {
		t.Fatal(err)
	}
	tick("2026-01-05T08:31:00Z")
	if got := rec.times(); len(got) != 2 {
		t.Fatalf("resuming backfilled %v, want nothing until 08:45", got)
	}
	tick("2026-01-05T08:45:05Z")
	if got := rec.times(); len(got) != 3 || got[2] != "2026-01-05T08:45:00Z" {
		t.Fatalf("resumed source fired %v, want 08:45 added", got)
	}
	if err := st.DeleteSource(ctx, "src", nil); err != nil {
		t.Fatal(err)
	}
	tick("2026-01-05T09:00:05Z")
	if got := rec.times(); len(got) != 3 {
		t.Fatalf("deleted source fired %v, want nothing after 08:45", got)
	}
}

// missedMessages returns the event-log messages of missed instants.
func missedMessages(t *testing.T, st store.Store) []string {
	t.Helper()
	list, _, err := st.ListEventLog(context.Background(), store.EventLogFilter{Status: store.EventLogMissed})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		out = append(out, e.ErrorMessage)
	}
	return out
}
