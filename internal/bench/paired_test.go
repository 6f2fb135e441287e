package bench

import (
	"errors"
	"fmt"
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

func TestInterleavedMirrorsTheHalvesAroundTheFloor(t *testing.T) {
	var order []string
	sides := []*side{{engine: "sqlite"}, {engine: "postgres"}}
	onSide := func(s *side, n int) (time.Duration, error) {
		order = append(order, fmt.Sprintf("%s %d", s.engine, n))
		return time.Duration(n) * time.Millisecond, nil
	}
	floor := func(n int) (time.Duration, error) {
		order = append(order, fmt.Sprintf("floor %d", n))
		return time.Duration(n) * 2 * time.Millisecond, nil
	}
	took, floorTotal, err := interleaved(201, sides, onSide, floor)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sqlite 100", "postgres 100", "floor 100", "floor 101", "postgres 101", "sqlite 101"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if took["sqlite"] != 201*time.Millisecond || took["postgres"] != 201*time.Millisecond || floorTotal != 402*time.Millisecond {
		t.Errorf("totals %v, floor %v; want 201ms each and 402ms", took, floorTotal)
	}
	if len(took) != 2 {
		t.Errorf("totals %v: want one per engine, the floor apart", took)
	}

	// One engine: kici, floor, floor, kici.
	order = nil
	if _, _, err := interleaved(4, sides[:1], onSide, floor); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sqlite 2", "floor 2", "floor 2", "sqlite 2"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}

	failing := func(*side, int) (time.Duration, error) { return 0, errors.New("runs never succeeded") }
	if _, _, err := interleaved(4, sides, failing, floor); err == nil || !strings.HasPrefix(err.Error(), "sqlite: ") {
		t.Errorf("err = %v, want the failing engine named", err)
	}
}
