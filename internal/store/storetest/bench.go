package storetest

import (
	"context"
	"fmt"
	"testing"

	"kici.dev/kici/internal/store"
)

// BenchmarkClaimNext measures enqueue+claim round trips on s: each
// iteration enqueues one labelled entry and claims it back with ClaimNext,
// against a backlog of entries no benchmark agent may take (so the claim
// query has to skip rows).
func BenchmarkClaimNext(b *testing.B, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		if err := s.Enqueue(ctx, &store.QueueEntry{ID: fmt.Sprintf("backlog-%d", i), RunID: "r", JobName: "j",
			RunsOnLabels: []string{"windows"}}); err != nil {
			b.Fatal(err)
		}
	}
	labels := []string{"linux", "x64", "docker"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("e-%d", i)
		if err := s.Enqueue(ctx, &store.QueueEntry{ID: id, RunID: "r", JobName: "j", RunsOnLabels: []string{"linux"}}); err != nil {
			b.Fatal(err)
		}
		e, err := s.ClaimNext(ctx, "agent", labels, at(60))
		if err != nil {
			b.Fatal(err)
		}
		if e == nil || e.ID != id {
			b.Fatalf("claimed %+v, want %s", e, id)
		}
	}
}
