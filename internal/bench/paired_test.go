package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPairedAlternatesWhichEngineGoesFirst(t *testing.T) {
	sides := []*side{{engine: "sqlite"}, {engine: "postgres"}}
	var order []string
	got, err := paired(sides, 4, func(s *side) (time.Duration, error) {
		order = append(order, s.engine)
		return time.Duration(len(order)) * time.Millisecond, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sqlite", "postgres", "postgres", "sqlite", "sqlite", "postgres", "postgres", "sqlite"}
	if !slices.Equal(order, want) {
		t.Fatalf("samples taken in order %v, want %v", order, want)
	}
	// Each engine's samples keep the order they were taken in.
	if s := got["sqlite"]; !slices.Equal(s, []time.Duration{1e6, 4e6, 5e6, 8e6}) {
		t.Errorf("sqlite samples %v", s)
	}
	if p := got["postgres"]; !slices.Equal(p, []time.Duration{2e6, 3e6, 6e6, 7e6}) {
		t.Errorf("postgres samples %v", p)
	}
}

func TestPairedStopsAtTheFirstFailureAndNamesItsEngine(t *testing.T) {
	sides := []*side{{engine: "sqlite"}, {engine: "postgres"}}
	calls := 0
	_, err := paired(sides, 3, func(s *side) (time.Duration, error) {
		calls++
		if s.engine == "postgres" {
			return 0, errors.New("step never started")
		}
		return time.Millisecond, nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "postgres: step never started") {
		t.Fatalf("err = %v, want it to name postgres", err)
	}
	if calls != 2 {
		t.Errorf("%d samples taken, want 2: the failing one ends the scenario", calls)
	}
}
