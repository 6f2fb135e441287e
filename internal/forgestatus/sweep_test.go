package forgestatus

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// The TTL sweep reads checkRunTrackingTtlDays live: 0 keeps every row, 7
// removes rows last updated more than 7 days ago and keeps newer ones.
func TestSweepFollowsTheLiveTTL(t *testing.T) {
	ctx := context.Background()
	st := teststore.SQLite(t)
	for _, id := range []string{"old", "new"} {
		if err := st.UpsertCheckRunDesired(ctx, &store.CheckRun{JobID: id, RunID: "r", SourceID: "s", Provider: store.CheckProviderGitLab,
			Repo: "a/b", SHA: "c", Name: "kici/ci/" + id, DesiredState: "success", DesiredBody: []byte(`{}`), DesiredHash: "h", DesiredTerminal: true}); err != nil {
			t.Fatal(err)
		}
	}
	// "old" was last delivered ten days ago.
	if err := st.RecordCheckRunDelivery(ctx, "old", store.CheckRunDelivery{OK: true, Hash: "h", State: "success", At: time.Now().Add(-10 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ttl := int64(0)
	r := New(st, Config{TTLDays: func(context.Context) int64 { return ttl }})
	count := func() int {
		rows, err := st.ListCheckRuns(ctx, store.CheckRunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(rows)
	}
	r.SweepNow(ctx)
	if n := count(); n != 2 {
		t.Fatalf("ttl 0 swept rows: %d left", n)
	}
	ttl = 7
	r.SweepNow(ctx)
	rows, _ := st.ListCheckRuns(ctx, store.CheckRunFilter{})
	if len(rows) != 1 || rows[0].JobID != "new" {
		t.Fatalf("after a 7-day sweep: %+v", rows)
	}
}
