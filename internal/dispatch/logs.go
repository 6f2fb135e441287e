package dispatch

import (
	"kici.dev/kici/internal/protocol"
)

// Batching bounds: the lines of consecutive log.chunk frames are written
// together, up to these many lines or text bytes per batch.
const (
	maxBatchLines = 20000
	maxBatchBytes = 4 << 20
)

type logKey struct {
	runID, jobID string
	step         int
}

// logBatch holds the lines of the log.chunk frames read since the last
// write, per step, in arrival order. It belongs to one connection's message
// loop. When no frame is waiting, or when the batch is large, the loop
// hands it to a writer goroutine (startLogWrite) and goes on reading
// frames into the next batch: on PostgreSQL a write is round trips to
// the server, and decoding the next frames meanwhile keeps the loop busy
// instead of waiting. One write is in flight at a time, so a step's lines
// are stored and acknowledged in order. Before any other message, on a
// chunk that does not continue its step's lines, and when the connection
// ends, the loop waits for the write in flight and writes what it holds
// itself (flushLogs): a status is handled only after the lines before it
// are stored. Since the loop waits for a write in flight before starting
// the next, a slow store still slows the agent down (and, through its
// bounded outbox, the step).
type logBatch struct {
	order    []logKey
	steps    map[logKey]*pendingLines
	lines    int
	bytes    int
	reserved int // lines the steps' slices were made for
}

type pendingLines struct {
	offset int64
	lines  []protocol.LogLine
}

// logChunk applies one owned log.chunk: buffered when it carries an offset
// and the sink stores by offset, else written at once (agents without
// LogAcks; replays dropped by seq as before).
func (fr *frameHandler) logChunk(c *agentConn, js *jobState, jobID string, m *protocol.LogChunk) {
	runID := m.RunID
	if js != nil {
		runID = js.entry.RunID // set when tracking began, never changed
	}
	if m.Offset == nil || fr.logs == nil || *m.Offset < 0 {
		if !fr.reg.newChunk(js, m.Seq) {
			return // replay of a chunk already stored
		}
		if fr.logs != nil && len(m.Lines) > 0 {
			if err := fr.logs.Append(runID, jobID, m.StepIndex, m.Lines); err != nil {
				fr.log.Warn("append log lines", "job", jobID, "err", err)
			}
		}
		return
	}
	if c.logFailed {
		return // a write failed: the connection is closing, the agent sends it again
	}
	b := c.logs
	if b == nil {
		b = &logBatch{steps: map[logKey]*pendingLines{}}
		c.logs = b
	}
	k := logKey{runID, jobID, m.StepIndex}
	p := b.steps[k]
	if p != nil && p.offset+int64(len(p.lines)) != *m.Offset {
		// Not a continuation: write what we have first, then start a
		// batch of its own (the one written is gone from c.logs).
		if !fr.flushLogs(c) {
			return // the connection is closing; the agent sends it again
		}
		b = &logBatch{steps: map[logKey]*pendingLines{}}
		c.logs = b
		p = nil
	}
	if p == nil {
		// Sized like the last batch: a step printing fast fills batches
		// of about the same size, and growing the slice from the first
		// chunk's lines by doubling copied it over and over. What a batch
		// reserves beyond its lines is bounded by maxBatchLines, however
		// many steps an agent sends lines for.
		size := max(min(c.logHint, maxBatchLines-b.reserved), len(m.Lines))
		b.reserved += size
		p = &pendingLines{offset: *m.Offset, lines: make([]protocol.LogLine, 0, size)}
		b.steps[k] = p
		b.order = append(b.order, k)
	}
	p.lines = append(p.lines, m.Lines...)
	b.lines += len(m.Lines)
	for i := range m.Lines {
		b.bytes += len(m.Lines[i].Text)
	}
	if b.lines >= maxBatchLines || b.bytes >= maxBatchBytes {
		fr.startLogWrite(c)
	}
}

// logWrite is a batch being written by a goroutine of its own.
type logWrite struct {
	done chan struct{}
	ok   bool // what writeLogs returned; read after done is closed
}

// startLogWrite hands the connection's batch to a writer goroutine, once
// the write in flight (if any) has ended, and returns at once. It reports
// whether the connection may go on (false: the write in flight failed).
func (fr *frameHandler) startLogWrite(c *agentConn) bool {
	if c.logFailed || !fr.awaitLogWrite(c) {
		return false
	}
	b := c.logs
	if b == nil || len(b.order) == 0 {
		return true
	}
	c.logs, c.logHint = nil, b.lines/len(b.order)
	w := &logWrite{done: make(chan struct{})}
	c.logWrite = w
	go func() {
		w.ok = fr.writeLogs(c, b)
		close(w.done)
	}()
	return true
}

// awaitLogWrite waits for the write in flight, if any, and reports whether
// it succeeded. After a failure the lines read meanwhile are dropped
// unacknowledged, and so is every later line of the connection
// (c.logFailed): the connection is closing and the agent sends them again.
// Storing a later line would store it past the lines that failed, and the
// store would then count those as skipped and refuse them when resent.
func (fr *frameHandler) awaitLogWrite(c *agentConn) bool {
	w := c.logWrite
	if w == nil {
		return true
	}
	<-w.done
	c.logWrite = nil
	if !w.ok {
		c.logs, c.logFailed = nil, true
	}
	return w.ok
}

// flushLogs waits for the write in flight, then writes the connection's
// batch itself: when it returns, every line read so far is stored and
// acknowledged. It reports whether the connection may go on.
func (fr *frameHandler) flushLogs(c *agentConn) bool {
	if c.logFailed || !fr.awaitLogWrite(c) {
		return false
	}
	b := c.logs
	c.logs = nil
	if !fr.writeLogs(c, b) {
		c.logFailed = true
		return false
	}
	return true
}

// writeLogs writes batch b, one append per step, and acknowledges what is
// stored. A failed append closes the connection without acknowledging: the
// agent keeps the lines and sends them again after it reconnects. It
// reports whether the connection may go on.
func (fr *frameHandler) writeLogs(c *agentConn, b *logBatch) bool {
	if b == nil || len(b.order) == 0 {
		return true
	}
	ok := true
	for _, k := range b.order {
		p := b.steps[k]
		if !ok {
			break
		}
		res, err := fr.logs.AppendFrom(k.runID, k.jobID, k.step, p.offset, p.lines)
		if err != nil {
			fr.log.Error("storing log lines failed; closing the agent connection so it sends them again", "job", k.jobID, "step", k.step, "err", err)
			c.close(protocol.CloseInternalError, "log store error")
			ok = false
			break
		}
		if res.Missing > 0 {
			fr.log.Error("log lines missing before a chunk", "job", k.jobID, "step", k.step, "missing", res.Missing)
		}
		fr.ackLogs(c, k.runID, k.jobID, k.step, res.Acked)
	}
	return ok
}

// ackLogs sends log.ack; a failed write ends the connection (the agent
// replays what it did not see acknowledged).
func (fr *frameHandler) ackLogs(c *agentConn, runID, jobID string, step int, offset int64) {
	if err := c.send(&protocol.LogAck{Type: protocol.TypeLogAck, RunID: runID, JobID: jobID, StepIndex: step, Offset: offset}); err != nil {
		fr.log.Debug("send log.ack", "agent", c.id, "err", err)
		c.close(protocol.CloseInternalError, "send failed")
	}
}

// refuseLogChunk acknowledges a chunk the agent may not write (a job it
// does not own) without storing it, so the agent does not hold it forever.
func (fr *frameHandler) refuseLogChunk(c *agentConn, msg any) {
	if m, ok := msg.(*protocol.LogChunk); ok && m.Offset != nil && fr.logs != nil {
		fr.ackLogs(c, m.RunID, m.JobID, m.StepIndex, *m.Offset+int64(len(m.Lines)))
	}
}
