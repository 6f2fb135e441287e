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
// loop; the loop writes it (flushLogs) when no frame is waiting, before any
// other message, when it is large, and when the connection ends. Since the
// loop reads no further frame while it writes, a slow store slows the agent
// down (and, through its bounded outbox, the step).
type logBatch struct {
	order []logKey
	steps map[logKey]*pendingLines
	lines int
	bytes int
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
	b := c.logs
	if b == nil {
		b = &logBatch{steps: map[logKey]*pendingLines{}}
		c.logs = b
	}
	k := logKey{runID, jobID, m.StepIndex}
	p := b.steps[k]
	if p != nil && p.offset+int64(len(p.lines)) != *m.Offset {
		fr.flushLogs(c) // not a continuation: write what we have first
		p = nil
	}
	if p == nil {
		p = &pendingLines{offset: *m.Offset}
		b.steps[k] = p
		b.order = append(b.order, k)
	}
	p.lines = append(p.lines, m.Lines...)
	b.lines += len(m.Lines)
	for i := range m.Lines {
		b.bytes += len(m.Lines[i].Text)
	}
	if b.lines >= maxBatchLines || b.bytes >= maxBatchBytes {
		fr.flushLogs(c)
	}
}

// flushLogs writes the connection's batch, one append per step, and
// acknowledges what is stored. A failed append closes the connection
// without acknowledging: the agent keeps the lines and sends them again
// after it reconnects. It reports whether the connection may go on.
func (fr *frameHandler) flushLogs(c *agentConn) bool {
	b := c.logs
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
	c.logs = nil
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
