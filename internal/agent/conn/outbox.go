package conn

import (
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"kici.dev/kici/internal/protocol"
)

// Outbox limits. Nothing queued is ever dropped: past the memory bound a
// log chunk waits for room (the step's output pipe is read more slowly, so
// the step blocks), or goes to the spill file while the orchestrator is
// unreachable.
const (
	// DefaultMaxLogBytes bounds the log chunks held in memory, queued or
	// written but not yet acknowledged (LogAck).
	DefaultMaxLogBytes = 8 << 20
	// DefaultMaxSpillBytes bounds the spill file; past it a log chunk waits
	// even while disconnected.
	DefaultMaxSpillBytes = 1 << 30
	// StallSpillAfter is how long a log chunk waits for room while
	// connected before it is spilled instead: a connection that makes no
	// progress at all for that long is treated like a lost one.
	StallSpillAfter = 30 * time.Second
	// maxMergeLines and maxMergeBytes cap a queued chunk that later chunks
	// of the same step are merged into (fewer, larger frames under load).
	maxMergeLines = 2000
	maxMergeBytes = 256 << 10
)

type ackKey struct {
	jobID string
	step  int
}

type item struct {
	msg      any
	frame    []byte             // encoding, once computed (or read back from the spill)
	logChunk *protocol.LogChunk // set for log.chunk frames
	size     int64              // accounted bytes of a log chunk
}

// chunkSize estimates the memory a chunk holds: its text plus a fixed
// overhead per line and per frame.
func chunkSize(lc *protocol.LogChunk) int64 {
	n := int64(128)
	for i := range lc.Lines {
		n += int64(len(lc.Lines[i].Text)) + 48
	}
	return n
}

// outbox is the ordered queue of frames not yet delivered. In memory it holds
// the head of the queue (items) and the log chunks written in this session
// but not acknowledged (unacked); the tail may live in the spill file.
// Frames leave in push order: once anything is spilled, every later frame
// goes to the spill too until it has been read back.
type outbox struct {
	mu       sync.Mutex
	cond     *sync.Cond
	items    []*item
	inflight *item
	unacked  []*item
	// ackedTo is the highest acknowledged offset per job and step: an ack
	// can arrive before the write that carried its chunk has returned.
	ackedTo   map[ackKey]int64
	logBytes  int64 // log chunks in items and unacked
	maxLog    int64
	connected bool // a registered session is up
	acks      bool // this session acknowledges log chunks
	stopped   bool // Run has returned: never wait
	spill     *spill
	spillDir  string
	maxSpill  int64
	spillErr  bool // the spill failed once: wait instead
	logger    *slog.Logger
	notify    chan struct{}
}

func newOutbox(maxLog, maxSpill int64, spillDir string, logger *slog.Logger) *outbox {
	if maxLog <= 0 {
		maxLog = DefaultMaxLogBytes
	}
	if maxSpill <= 0 {
		maxSpill = DefaultMaxSpillBytes
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := &outbox{maxLog: maxLog, maxSpill: maxSpill, spillDir: spillDir, logger: logger, notify: make(chan struct{}, 1)}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *outbox) wake() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

func (o *outbox) spilling() bool { return o.spill != nil && o.spill.count > 0 }

// push queues msg. A log chunk may wait (see the package limits); every
// other frame is queued at once.
func (o *outbox) push(msg any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	defer o.wake()
	lc, isLog := msg.(*protocol.LogChunk)
	if !isLog {
		if o.spilling() && o.toSpill(msg) {
			return
		}
		o.items = append(o.items, &item{msg: msg})
		return
	}
	size := chunkSize(lc)
	var stall *time.Timer
	var stalled bool
	for {
		switch {
		case o.spilling():
			if o.spill.bytes+size <= o.maxSpill || o.stopped {
				if o.toSpill(msg) {
					return
				}
			}
		case o.logBytes+size <= o.maxLog || o.logBytes == 0 || o.stopped:
			o.logBytes += size
			if !o.merge(lc, size) {
				o.items = append(o.items, &item{msg: msg, logChunk: lc, size: size})
			}
			return
		case (!o.connected || stalled) && !o.spillErr:
			if o.toSpill(msg) {
				return
			}
		}
		if stall == nil {
			stall = time.AfterFunc(StallSpillAfter, func() {
				o.mu.Lock()
				stalled = true
				o.cond.Broadcast()
				o.mu.Unlock()
			})
			defer stall.Stop()
		}
		o.cond.Wait()
	}
}

// merge appends lc to the queued chunk at the tail when it continues it
// (same job and step, next offset) and the result stays small. Caller holds
// o.mu.
func (o *outbox) merge(lc *protocol.LogChunk, size int64) bool {
	if len(o.items) == 0 {
		return false
	}
	t := o.items[len(o.items)-1]
	p := t.logChunk
	if p == nil || t == o.inflight || t.frame != nil || p.JobID != lc.JobID || p.RunID != lc.RunID ||
		p.StepIndex != lc.StepIndex || (p.Offset == nil) != (lc.Offset == nil) ||
		len(p.Lines)+len(lc.Lines) > maxMergeLines || t.size+size > maxMergeBytes {
		return false
	}
	if p.Offset != nil && *p.Offset+int64(len(p.Lines)) != *lc.Offset {
		return false
	}
	p.Lines = append(p.Lines, lc.Lines...)
	p.Seq = lc.Seq // the newest: a replay filter by seq still sees it as new
	p.Timestamp = lc.Timestamp
	t.size += size
	return true
}

// toSpill appends msg to the spill file. Caller holds o.mu.
func (o *outbox) toSpill(msg any) bool {
	if o.spill == nil {
		s, err := openSpill(o.spillDir)
		if err != nil {
			o.logger.Error("cannot open the outbox spill file; log output waits for the orchestrator instead", "err", err)
			o.spillErr = true
			return false
		}
		o.spill = s
	}
	b, err := json.Marshal(msg)
	if err == nil {
		err = o.spill.write(b)
	}
	if err != nil {
		o.logger.Error("cannot write the outbox spill file; log output waits for the orchestrator instead", "err", err)
		o.spillErr = true
		return false
	}
	return true
}

// loadSpill moves frames from the spill file back to memory, oldest first,
// while memory allows (at least one). Caller holds o.mu.
func (o *outbox) loadSpill() {
	for o.spilling() && (len(o.items) == 0 || o.logBytes < o.maxLog) {
		b, err := o.spill.read()
		if err != nil {
			o.logger.Error("cannot read the outbox spill file", "err", err)
			o.spillErr = true
			return
		}
		msg, err := protocol.Decode(b)
		if err != nil {
			o.logger.Error("unreadable frame in the outbox spill file", "err", err)
			continue
		}
		it := &item{msg: msg, frame: b}
		if lc, ok := msg.(*protocol.LogChunk); ok {
			it.logChunk, it.size = lc, chunkSize(lc)
			o.logBytes += it.size
		}
		o.items = append(o.items, it)
	}
	o.cond.Broadcast() // the spill may have drained: pushers go to memory again
}

// next marks the head item in flight and returns it with its encoding.
func (o *outbox) next() (*item, []byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.items) == 0 && o.spilling() {
		o.loadSpill()
	}
	if len(o.items) == 0 {
		return nil, nil, nil
	}
	it := o.items[0]
	o.inflight = it
	if it.frame == nil {
		b, err := json.Marshal(it.msg)
		if err != nil {
			return it, nil, err
		}
		it.frame = b
	}
	return it, it.frame, nil
}

// done removes a written (or unencodable) item; failed leaves it queued. A
// written log chunk stays accounted until acknowledged when the session
// acknowledges chunks.
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
			break
		}
	}
	if it.logChunk == nil {
		return
	}
	if lc := it.logChunk; o.acks && lc.Offset != nil &&
		*lc.Offset+int64(len(lc.Lines)) > o.ackedTo[ackKey{lc.JobID, lc.StepIndex}] {
		o.unacked = append(o.unacked, it)
		return
	}
	o.logBytes -= it.size
	o.cond.Broadcast()
}

// ack frees the unacknowledged chunks of a job's step that end at or below
// a.Offset.
func (o *outbox) ack(a *protocol.LogAck) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := ackKey{a.JobID, a.StepIndex}
	if o.ackedTo == nil || len(o.ackedTo) > maxAckKeys {
		o.ackedTo = o.liveAckKeys()
	}
	o.ackedTo[k] = max(o.ackedTo[k], a.Offset)
	kept := o.unacked[:0]
	freed := false
	for _, it := range o.unacked {
		lc := it.logChunk
		if lc.JobID == a.JobID && lc.StepIndex == a.StepIndex && *lc.Offset+int64(len(lc.Lines)) <= a.Offset {
			o.logBytes -= it.size
			freed = true
			continue
		}
		kept = append(kept, it)
	}
	for i := len(kept); i < len(o.unacked); i++ {
		o.unacked[i] = nil
	}
	o.unacked = kept
	if freed {
		o.cond.Broadcast()
		o.wake()
	}
}

// maxAckKeys bounds ackedTo; past it only the steps with chunks still
// held are kept.
const maxAckKeys = 4096

// liveAckKeys returns ackedTo restricted to steps that still have chunks in
// memory. Caller holds o.mu.
func (o *outbox) liveAckKeys() map[ackKey]int64 {
	m := map[ackKey]int64{}
	for _, list := range [][]*item{o.items, o.unacked} {
		for _, it := range list {
			if lc := it.logChunk; lc != nil {
				k := ackKey{lc.JobID, lc.StepIndex}
				if v, ok := o.ackedTo[k]; ok {
					m[k] = v
				}
			}
		}
	}
	return m
}

// registered starts a session: chunks the previous session wrote but never
// saw acknowledged go out again first, in their order (the orchestrator
// stores each line once, by offset).
func (o *outbox) registered(acks bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.unacked) > 0 {
		o.items = append(append(make([]*item, 0, len(o.unacked)+len(o.items)), o.unacked...), o.items...)
		o.unacked = nil
	}
	o.acks, o.connected = acks, true
	o.ackedTo = nil // a new session acknowledges afresh
	o.cond.Broadcast()
	o.wake()
}

// disconnected ends a session: waiting chunks may now spill.
func (o *outbox) disconnected() {
	o.mu.Lock()
	o.connected = false
	o.cond.Broadcast()
	o.mu.Unlock()
}

// stop releases every waiting push for good (Run has returned).
func (o *outbox) stop() {
	o.mu.Lock()
	o.stopped = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

// len counts the frames not yet delivered: queued, spilled and written but
// unacknowledged.
func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.items) + len(o.unacked)
	if o.spill != nil {
		n += o.spill.count
	}
	return n
}

func marshal(msg any) ([]byte, error) { return json.Marshal(msg) }
