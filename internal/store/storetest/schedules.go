package storetest

import (
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// testSchedules covers ScheduleStore: a released lease is free at once for
// another holder, a foreign release changes nothing; a schedule instant is
// recorded once (also under concurrent recorders), the latest one is
// returned per key; a missed entry lands in the event log.
func testSchedules(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ok, err := s.AcquireLease(ctx, "sched-rel", "A", time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("A could not take a free lease")
	}
	must(t, s.ReleaseLease(ctx, "sched-rel", "B")) // not B's: no effect
	if ok, _ := s.AcquireLease(ctx, "sched-rel", "B", time.Hour); ok {
		t.Fatal("B took a lease A still holds after B's release")
	}
	must(t, s.ReleaseLease(ctx, "sched-rel", "A"))
	if ok, err := s.AcquireLease(ctx, "sched-rel", "B", time.Hour); err != nil || !ok {
		t.Fatalf("B after A's release: ok=%v err=%v, want taken at once", ok, err)
	}

	if last, err := s.LastScheduleFire(ctx, "k1"); err != nil || !last.IsZero() {
		t.Fatalf("LastScheduleFire of a new key = %v, %v; want zero", last, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.RecordScheduleFire(ctx, "k1", at(10))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("8 concurrent records of one instant: %d recorded, want exactly 1", wins)
	}
	for _, sec := range []int{30, 20} {
		ok, err := s.RecordScheduleFire(ctx, "k1", at(sec))
		must(t, err)
		if !ok {
			t.Fatalf("instant %d not recorded", sec)
		}
	}
	_, err = s.RecordScheduleFire(ctx, "k2", at(99))
	must(t, err)
	if last, err := s.LastScheduleFire(ctx, "k1"); err != nil || !last.Equal(at(30)) {
		t.Fatalf("LastScheduleFire(k1) = %v, %v; want %v", last, err, at(30))
	}

	must(t, s.RecordMissed(ctx, &store.EventLogEntry{DeliveryID: "schedule:k1:missed:20", OrgID: "org-m", Event: "schedule",
		Source: "internal", Provider: provider.Kici, ErrorMessage: "3 instants missed"}))
	got, n, err := s.ListEventLog(ctx, store.EventLogFilter{OrgID: "org-m", Status: store.EventLogMissed})
	must(t, err)
	if n != 1 || len(got) != 1 || got[0].Status != store.EventLogMissed || got[0].ErrorMessage != "3 instants missed" {
		t.Fatalf("missed entries = %d %+v", n, got)
	}
}
