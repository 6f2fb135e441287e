// Package groupcommit gives writes that arrive while another is being
// committed one transaction together (group commit).
//
// A write that finds no commit in flight is written at once, alone, so
// nothing waits when there is nothing to group. Writes that arrive while a
// commit is in flight queue; when it ends, the first of them leads: it
// writes every write queued so far (up to Max, its own first) in one call
// of Write, wakes them with their outcomes, and hands the lead to the
// first write that queued meanwhile. Every caller returns only once its
// own write is committed or refused.
//
// Grouping pays where commits are serialised: SQLite's single writer, or a
// stream of short transactions whose commits and round trips cost more
// than the statements in them.
package groupcommit

import (
	"context"
	"errors"
	"sync"
)

// Queue groups the writes of type T handed to Do. The zero value is not
// usable: set Write (and Max, 0 for no bound) before the first Do. Safe
// for concurrent use.
type Queue[T any] struct {
	// Write writes a group (one item or more, in arrival order) and
	// returns each item's outcome, at the same index: nil when it is
	// stored. ctx is the leading caller's. Write is never called
	// concurrently with itself.
	Write func(ctx context.Context, group []T) []error
	// Max bounds a group's size (0 = unbounded).
	Max int

	mu      sync.Mutex
	pending []*call[T]
	leading bool // a group is being written; false implies pending is empty
}

// call is one write waiting for its group.
type call[T any] struct {
	v    T
	err  error
	done chan struct{} // closed once err is final
	lead chan struct{} // closed to make this call lead the next group
}

// Do writes v, alone or in a group with the writes queued beside it, and
// returns v's own outcome from Write.
func (q *Queue[T]) Do(ctx context.Context, v T) error {
	c := &call[T]{v: v, done: make(chan struct{}), lead: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, c)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead {
		select {
		case <-c.done:
			return c.err
		case <-c.lead:
		}
	}
	q.leadGroup(ctx)
	<-c.done
	return c.err
}

// Queued is how many writes are queued and not yet being written.
func (q *Queue[T]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// leadGroup writes the calls queued now (the leader's own first) as one
// group, then passes the lead on or ends it. A Write that panics fails its
// group's calls (the panic goes on in the leader) and still passes the
// lead on, so the queue never stalls; a Write that returns fewer outcomes
// than calls fails the calls it said nothing about, so that no caller is
// told its write is stored when it may not be.
func (q *Queue[T]) leadGroup(ctx context.Context) {
	q.mu.Lock()
	n := len(q.pending)
	if q.Max > 0 {
		n = min(n, q.Max)
	}
	group := q.pending[:n:n]
	q.pending = append([]*call[T](nil), q.pending[n:]...)
	q.mu.Unlock()

	answered := false
	defer func() {
		if !answered {
			for _, c := range group {
				c.err = errWritePanicked
				close(c.done)
			}
		}
		q.mu.Lock()
		if len(q.pending) > 0 {
			close(q.pending[0].lead)
		} else {
			q.leading = false
		}
		q.mu.Unlock()
	}()

	vs := make([]T, n)
	for i, c := range group {
		vs[i] = c.v
	}
	errs := q.Write(ctx, vs)
	for i, c := range group {
		c.err = errNoOutcome
		if i < len(errs) {
			c.err = errs[i]
		}
		close(c.done)
	}
	answered = true
}

// errWritePanicked answers the calls of a group whose Write panicked.
var errWritePanicked = errors.New("groupcommit: the group's write panicked")

// errNoOutcome answers a call Write returned no outcome for.
var errNoOutcome = errors.New("groupcommit: the group's write gave no outcome for this call")
