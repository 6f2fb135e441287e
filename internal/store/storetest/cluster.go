package storetest

import (
	"context"
	"testing"

	"kici.dev/kici/internal/store"
)

// testClusterSettings: overrides round-trip, null-style resets delete a
// knob, and the version moves only on a real change.
func testClusterSettings(t *testing.T, s store.Store) {
	ctx := context.Background()
	cs, err := s.GetClusterSettings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Values) != 0 || cs.Version != 0 || !cs.UpdatedAt.IsZero() {
		t.Fatalf("fresh settings %+v", cs)
	}
	cs, err = s.PatchClusterSettings(ctx, map[string]int64{"agent_token_ttl_ms": 60000, "queue_timeout_ms": 5000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Values["agent_token_ttl_ms"] != 60000 || cs.Values["queue_timeout_ms"] != 5000 || len(cs.Values) != 2 || cs.Version != 1 || cs.UpdatedAt.IsZero() {
		t.Fatalf("after set %+v", cs)
	}
	// same values again: nothing changes, version stays
	cs, err = s.PatchClusterSettings(ctx, map[string]int64{"agent_token_ttl_ms": 60000}, []string{"never_set"})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Version != 1 {
		t.Fatalf("no-op patch bumped version to %d", cs.Version)
	}
	cs, err = s.PatchClusterSettings(ctx, map[string]int64{"agent_token_ttl_ms": 2000}, []string{"queue_timeout_ms"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetClusterSettings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || len(got.Values) != 1 || got.Values["agent_token_ttl_ms"] != 2000 {
		t.Fatalf("after reset %+v (patch returned %+v)", got, cs)
	}
}
