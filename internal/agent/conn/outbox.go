package conn

import (
	"encoding/json"
	"fmt"
	"sync"

	"kici.dev/kici/internal/protocol"
)

// DefaultMaxLogChunks caps the log.chunk frames held while the orchestrator
// is unreachable (KiCI's ring holds 5 000 messages).
const DefaultMaxLogChunks = 5000

// DroppedLinesMarker is the line that replaces log chunks dropped from a
// full outbox.
func DroppedLinesMarker(lines int) string {
	return fmt.Sprintf("[kici-agent: %d log lines dropped while the orchestrator was unreachable]", lines)
}

type item struct {
	msg      any
	logChunk *protocol.LogChunk // set for log.chunk frames
	marker   bool               // a chunk replaced by a dropped-lines marker
	dropped  int                // lines represented by a marker
}

// outbox is the ordered queue of frames not yet written. Only log chunks are
// ever dropped (oldest first, beyond maxLogs); statuses, acks and heartbeats
// stay until written.
type outbox struct {
	mu       sync.Mutex
	items    []*item
	inflight *item
	logs     int
	maxLogs  int
	notify   chan struct{}
}

func newOutbox(maxLogs int) *outbox {
	if maxLogs <= 0 {
		maxLogs = DefaultMaxLogChunks
	}
	return &outbox{maxLogs: maxLogs, notify: make(chan struct{}, 1)}
}

func (o *outbox) wake() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

func (o *outbox) push(msg any) {
	o.mu.Lock()
	it := &item{msg: msg}
	if lc, ok := msg.(*protocol.LogChunk); ok {
		it.logChunk = lc
		o.logs++
	}
	o.items = append(o.items, it)
	for o.logs > o.maxLogs && o.dropOldestLog() {
	}
	o.mu.Unlock()
	o.wake()
}

// dropOldestLog turns the oldest droppable log chunk into a marker (or
// merges it into an earlier marker of the same job and step).
func (o *outbox) dropOldestLog() bool {
	for idx, it := range o.items {
		if it.logChunk == nil || it.marker || it == o.inflight {
			continue
		}
		lc := it.logChunk
		n := len(lc.Lines)
		o.logs--
		for _, prev := range o.items[:idx] {
			if prev.marker && prev != o.inflight && prev.logChunk.JobID == lc.JobID && prev.logChunk.StepIndex == lc.StepIndex {
				prev.dropped += n
				prev.logChunk.Lines = []protocol.LogLine{{Timestamp: lc.Timestamp, Text: DroppedLinesMarker(prev.dropped)}}
				o.items = append(o.items[:idx], o.items[idx+1:]...)
				return true
			}
		}
		cp := *lc
		cp.Lines = []protocol.LogLine{{Timestamp: lc.Timestamp, Text: DroppedLinesMarker(n)}}
		it.logChunk = &cp
		it.msg = &cp
		it.marker = true
		it.dropped = n
		return true
	}
	return false
}

// next marks the head item in flight and returns it with its encoding.
func (o *outbox) next() (*item, []byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.items) == 0 {
		return nil, nil, nil
	}
	it := o.items[0]
	o.inflight = it
	b, err := json.Marshal(it.msg)
	return it, b, err
}

// done removes a written (or unencodable) item; failed leaves it queued.
func (o *outbox) done(it *item, written bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inflight = nil
	if !written {
		return
	}
	for i, x := range o.items {
		if x == it {
			o.items = append(o.items[:i], o.items[i+1:]...)
			if it.logChunk != nil && !it.marker {
				o.logs--
			}
			return
		}
	}
}

func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.items)
}

func marshal(msg any) ([]byte, error) { return json.Marshal(msg) }
