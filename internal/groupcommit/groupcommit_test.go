package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// recorder is a Write that records each group and answers from answer;
// a group holding block waits until gate is closed.
type recorder struct {
	mu      sync.Mutex
	groups  [][]int
	block   int
	entered chan struct{}
	gate    chan struct{}
	active  int // Write calls running now
	overlap bool
	answer  func(v int) error
}

func (r *recorder) write(_ context.Context, group []int) []error {
	r.mu.Lock()
	r.active++
	r.overlap = r.overlap || r.active > 1
	r.groups = append(r.groups, append([]int(nil), group...))
	r.mu.Unlock()
	if group[0] == r.block {
		close(r.entered)
		<-r.gate
	}
	errs := make([]error, len(group))
	for i, v := range group {
		if r.answer != nil {
			errs[i] = r.answer(v)
		}
	}
	r.mu.Lock()
	r.active--
	r.mu.Unlock()
	return errs
}

// behindBlocked writes 0 (held inside Write until the gate opens), then n
// more values while it is held; once all n are queued it opens the gate
// and returns every value's answer.
func behindBlocked(t *testing.T, q *Queue[int], r *recorder, n int) map[int]error {
	t.Helper()
	r.block, r.entered, r.gate = 0, make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	answers := map[int]error{}
	var wg sync.WaitGroup
	do := func(v int) {
		wg.Go(func() {
			err := q.Do(t.Context(), v)
			mu.Lock()
			answers[v] = err
			mu.Unlock()
		})
	}
	do(0)
	<-r.entered
	for v := 1; v <= n; v++ {
		do(v)
	}
	wait.For(t, 10*time.Second, "every write queued behind the one in flight", func() bool { return q.Queued() == n })
	close(r.gate)
	wg.Wait()
	if len(answers) != n+1 {
		t.Fatalf("answers: %d, want %d", len(answers), n+1)
	}
	return answers
}

// Writes that arrive while one is being written share the next groups:
// the first is written alone at once, the 40 queued behind it go in two
// groups of at most Max, in arrival order within each, never two groups at
// the same time, and each caller gets its own answer.
func TestWritesArrivingTogetherShareAGroup(t *testing.T) {
	r := &recorder{answer: func(v int) error {
		if v%7 == 3 {
			return fmt.Errorf("refused %d", v)
		}
		return nil
	}}
	q := &Queue[int]{Write: r.write, Max: 32}
	answers := behindBlocked(t, q, r, 40)
	for v, err := range answers {
		if want := r.answer(v); fmt.Sprint(err) != fmt.Sprint(want) {
			t.Errorf("answer of %d: %v, want %v", v, err, want)
		}
	}
	if len(r.groups) != 3 || len(r.groups[0]) != 1 || len(r.groups[1]) != 32 || len(r.groups[2]) != 8 {
		t.Fatalf("groups: %v, want sizes 1, 32 and 8", r.groups)
	}
	seen := map[int]bool{}
	for _, g := range r.groups {
		for _, v := range g {
			if seen[v] {
				t.Errorf("%d written twice", v)
			}
			seen[v] = true
		}
	}
	if len(seen) != 41 {
		t.Errorf("values written: %d, want 41", len(seen))
	}
	if r.overlap {
		t.Error("two groups were written at the same time")
	}
	// Nothing is left queued or leading: the next write goes alone, at once.
	if err := q.Do(t.Context(), 100); err != nil || len(r.groups) != 4 || len(r.groups[3]) != 1 {
		t.Errorf("a write after the burst: %v, groups %v", err, r.groups)
	}
}

// Without a bound, everything queued goes in one group; a lone write never
// waits for company.
func TestUnboundedQueueAndLoneWrites(t *testing.T) {
	r := &recorder{}
	q := &Queue[int]{Write: r.write}
	behindBlocked(t, q, r, 100)
	if len(r.groups) != 2 || len(r.groups[1]) != 100 {
		t.Fatalf("groups: %d, want the first alone and one of 100", len(r.groups))
	}
	r2 := &recorder{block: -1, answer: func(int) error { return errors.New("no") }}
	q2 := &Queue[int]{Write: r2.write}
	for v := range 5 {
		if err := q2.Do(t.Context(), v); err == nil || err.Error() != "no" {
			t.Fatalf("lone write %d: %v", v, err)
		}
	}
	if len(r2.groups) != 5 {
		t.Errorf("lone writes made %d groups, want 5", len(r2.groups))
	}
}

// A Write that panics fails the other callers of its group (the leader's
// own call panics on), hands the lead on, and leaves the queue working; a
// Write that answers for fewer calls than it was given fails the others
// instead of reporting them stored.
func TestAPanickingOrShortWriteFailsItsCallsAndTheQueueGoesOn(t *testing.T) {
	gate, entered := make(chan struct{}), make(chan struct{})
	q := &Queue[int]{Write: func(_ context.Context, group []int) []error {
		switch {
		case group[0] == 0: // the first group waits while 1 and 2 queue
			close(entered)
			<-gate
		case len(group) == 2: // the group of 1 and 2, led by whichever queued first
			panic("write failed badly")
		case group[0] == 4:
			return nil
		}
		return make([]error, len(group))
	}}
	do := func(v int) (panicked any, err error) {
		defer func() { panicked = recover() }()
		return nil, q.Do(context.Background(), v)
	}
	type answer struct {
		err      error
		panicked any
	}
	answers := map[int]chan answer{}
	for _, v := range []int{0, 1, 2} {
		answers[v] = make(chan answer, 1)
		go func() {
			p, err := do(v)
			answers[v] <- answer{err, p}
		}()
		if v == 0 {
			<-entered
		}
	}
	wait.For(t, 10*time.Second, "1 and 2 queued", func() bool { return q.Queued() == 2 })
	close(gate)
	outcome := map[string]int{}
	for v := range 3 {
		select {
		case a := <-answers[v]:
			switch {
			case a.panicked != nil:
				outcome["panic"]++
			case errors.Is(a.err, errWritePanicked):
				outcome["failed"]++
			case a.err == nil && v == 0:
				outcome["stored"]++
			default:
				t.Errorf("call %d: %v", v, a.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d never returned: the queue stalled", v)
		}
	}
	if outcome["stored"] != 1 || outcome["panic"] != 1 || outcome["failed"] != 1 {
		t.Errorf("outcomes %v: want the first stored, the panicking group's leader panicking and its other call failed", outcome)
	}
	if p, err := do(3); err != nil || p != nil {
		t.Fatalf("a write after the panic: %v %v", err, p)
	}
	if _, err := do(4); !errors.Is(err, errNoOutcome) {
		t.Fatalf("a write given no outcome: %v, want errNoOutcome", err)
	}
}
