package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
)

// TestTwoNodesCannotBothFireOneScheduleInstant: two nodes (two stores on
// one database) record the same schedule instant at once, many times over;
// for each instant exactly one of them is told it fired it.
func TestTwoNodesCannotBothFireOneScheduleInstant(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	var nodes [2]*postgres.Store
	for i := range nodes {
		st, err := postgres.Open(ctx, withPoolSize(url))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		nodes[i] = st
	}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for n := 0; n < 50; n++ {
		at := base.Add(time.Duration(n) * time.Minute)
		var won atomic.Int32
		var wg sync.WaitGroup
		for _, st := range nodes {
			for k := 0; k < 2; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					first, err := st.RecordScheduleFire(ctx, "acme/app:nightly:0", at)
					if err != nil {
						t.Error(err)
					}
					if first {
						won.Add(1)
					}
				}()
			}
		}
		wg.Wait()
		if got := won.Load(); got != 1 {
			t.Fatalf("instant %s fired by %d callers, want 1", at, got)
		}
	}
	last, err := nodes[1].LastScheduleFire(ctx, "acme/app:nightly:0")
	if err != nil || !last.Equal(base.Add(49*time.Minute)) {
		t.Fatalf("last fire %s %v", last, err)
	}
}
