package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPartitionBalancesExpectedTime: the longest tests are spread first, so
// neither shard is left with more than its share, and every test runs in
// exactly one shard, in the listing's order.
func TestPartitionBalancesExpectedTime(t *testing.T) {
	tests := []string{"TestA", "TestB", "TestC", "TestD", "TestE", "TestNew"}
	w := map[string]time.Duration{"TestA": 300 * time.Second, "TestB": 200 * time.Second, "TestC": 100 * time.Second,
		"TestD": 90 * time.Second, "TestE": 10 * time.Second}
	parts := partition(tests, w, 2)
	if len(parts) != 2 {
		t.Fatalf("got %d shards, want 2", len(parts))
	}
	var all []string
	sums := make([]time.Duration, 2)
	for i, p := range parts {
		all = append(all, p...)
		for _, name := range p {
			if d, ok := w[name]; ok {
				sums[i] += d
			} else {
				sums[i] += defaultWeight
			}
		}
		if !slices.IsSortedFunc(p, func(a, b string) int { return slices.Index(tests, a) - slices.Index(tests, b) }) {
			t.Errorf("shard %d %v is not in the listing's order", i, p)
		}
	}
	slices.Sort(all)
	if !slices.Equal(all, tests) {
		t.Errorf("tests across shards = %v, want each of %v once", all, tests)
	}
	if diff := sums[0] - sums[1]; diff > 60*time.Second || diff < -60*time.Second {
		t.Errorf("shard loads %v and %v differ by more than the shortest long test", sums[0], sums[1])
	}
	if one := partition([]string{"TestA"}, w, 4); len(one) != 1 {
		t.Errorf("one test over 4 shards made %d shards, want 1", len(one))
	}
}

// TestWeightsRoundTripAndRejectBadLines: what -record writes reads back, a
// missing file is no weights, and a malformed line is an error naming it.
func TestWeightsRoundTripAndRejectBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "durations.txt")
	if w, err := readWeights(path); err != nil || len(w) != 0 {
		t.Fatalf("missing file: %v, %v; want no weights, no error", w, err)
	}
	old := map[string]time.Duration{"TestKept": 5 * time.Second, "TestOld": time.Second}
	if err := writeWeights(path, old, map[string]time.Duration{"TestOld": 42500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	w, err := readWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	if w["TestKept"] != 5*time.Second || w["TestOld"] != 42500*time.Millisecond {
		t.Errorf("read back %v", w)
	}
	if err := os.WriteFile(path, []byte("12 TestA\nTestB 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readWeights(path); err == nil {
		t.Error("a line `TestB 3` was accepted")
	}
}
