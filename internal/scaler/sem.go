package scaler

import (
	"context"
	"sync"
)

// fifoSem is a counting semaphore that serves waiters strictly in arrival
// order: Release hands the slot directly to the oldest waiter, so a later
// Acquire can never jump the queue (KiCI SpawnSemaphore).
type fifoSem struct {
	mu      sync.Mutex
	size    int
	held    int
	waiters []chan struct{}
}

func newFifoSem(size int) *fifoSem { return &fifoSem{size: size} }

// Acquire blocks until a slot is granted or ctx ends (then it returns
// ctx.Err() and holds nothing).
func (s *fifoSem) Acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.held < s.size && len(s.waiters) == 0 {
		s.held++
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, w := range s.waiters {
			if w == ch {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				return ctx.Err()
			}
		}
		// Granted while we were giving up: pass the slot on.
		s.releaseLocked()
		return ctx.Err()
	}
}

// Release frees a slot, handing it to the oldest waiter if there is one.
func (s *fifoSem) Release() {
	s.mu.Lock()
	s.releaseLocked()
	s.mu.Unlock()
}

func (s *fifoSem) releaseLocked() {
	if len(s.waiters) > 0 && s.held <= s.size {
		ch := s.waiters[0]
		s.waiters = s.waiters[1:]
		close(ch) // the slot moves to the waiter; held is unchanged
		return
	}
	s.held--
}

// Resize changes the number of slots (reload). Holders above a smaller
// size keep their slots; no new grant happens until held < size.
func (s *fifoSem) Resize(size int) {
	s.mu.Lock()
	s.size = size
	for s.held < s.size && len(s.waiters) > 0 {
		ch := s.waiters[0]
		s.waiters = s.waiters[1:]
		s.held++
		close(ch)
	}
	s.mu.Unlock()
}

// Held returns the number of granted slots.
func (s *fifoSem) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}
