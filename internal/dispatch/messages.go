package dispatch

// The registered agent's message loop: job ownership and the job-scoped
// messages (acks, statuses, heartbeats, logs, outputs).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// serveRegistered is the message loop of a registered agent. Each frame's
// buffer goes back to the pool once decoded (releaseFrame).
func (fr *frameHandler) serveRegistered(ctx context.Context, c *agentConn, tok *store.AgentToken, frames <-chan []byte, readDone <-chan error) {
	defer fr.flushLogs(c)
	for {
		var frame []byte
		select {
		case frame = <-frames:
		default:
			// Nothing waiting: write the log lines read so far, while
			// the next frames are read.
			if !fr.startLogWrite(c) {
				return
			}
			select {
			case frame = <-frames:
			case <-readDone:
				return
			}
		}
		fr.reg.touch(c)
		msg, err := protocol.Decode(frame)
		releaseFrame(frame)
		if err != nil {
			if errors.Is(err, protocol.ErrUnknownType) {
				fr.log.Debug("ignoring unknown agent message", "agent", c.id, "err", err)
				continue
			}
			fr.reg.invalid(c, "invalid message")
			return
		}
		if _, isLog := msg.(*protocol.LogChunk); !isLog && !fr.flushLogs(c) {
			return // statuses only after the lines before them are stored
		}
		if !fr.handle(ctx, c, tok, msg) || c.logFailed {
			return
		}
	}
}

// jobRef returns the job id of a job-scoped message.
func jobRef(msg any) (jobID string, scoped bool) {
	switch m := msg.(type) {
	case *protocol.JobAck:
		return m.JobID, true
	case *protocol.JobReject:
		return m.JobID, true
	case *protocol.JobStatus:
		return m.JobID, true
	case *protocol.StepStatus:
		return m.JobID, true
	case *protocol.LogChunk:
		return m.JobID, true
	case *protocol.JobHeartbeat:
		return m.JobID, true
	}
	return "", false
}

// handle processes one message; false ends the connection.
func (fr *frameHandler) handle(ctx context.Context, c *agentConn, tok *store.AgentToken, msg any) bool {
	if jobID, scoped := jobRef(msg); scoped {
		if jobID == "" {
			fr.reg.invalid(c, "message has no jobId")
			return false
		}
		js, owned := fr.reg.owns(ctx, c, jobID)
		if !owned {
			fr.refuseLogChunk(c, msg)
			return fr.reg.violation(c, jobID)
		}
		fr.handleJobMessage(ctx, c, js, jobID, msg)
		return true
	}
	switch m := msg.(type) {
	case *protocol.Heartbeat:
		// lastSeen already refreshed
	case *protocol.AgentStatus:
		fr.reg.noteAgentStatus(c, m)
		fr.q.drain(ctx, c)
	case *protocol.AgentRegister:
		return fr.reg.register(ctx, c, tok, m)
	case *protocol.ProvenanceAttest:
		return fr.attest(ctx, c, m)
	default:
		fr.log.Debug("ignoring unexpected message", "agent", c.id, "type", fmt.Sprintf("%T", msg))
	}
	return true
}

// handleJobMessage applies an owned job-scoped message.
func (fr *frameHandler) handleJobMessage(ctx context.Context, c *agentConn, js *jobState, jobID string, msg any) {
	now := time.Now().UTC()
	switch m := msg.(type) {
	case *protocol.JobAck:
		if fr.reg.markAcked(c, js, false) {
			if err := fr.st.AckQueueEntry(ctx, jobID, c.id); err != nil {
				fr.log.Warn("ack queue entry", "job", jobID, "err", err)
			}
		}
	case *protocol.JobReject:
		if !fr.reg.reject(c, js, jobID) {
			return
		}
		fr.log.Info("job rejected by agent", "job", jobID, "agent", c.id, "reason", m.Reason)
		fr.q.requeueOrFail(ctx, jobID, &js.entry, "rejected by agent "+c.id+": "+string(m.Reason), c.id)
	case *protocol.JobStatus:
		fr.jobStatus(ctx, c, js, jobID, m, now)
	case *protocol.StepStatus:
		s := &store.Step{RunID: m.RunID, JobID: jobID, StepIndex: m.StepIndex, StepName: m.StepName,
			Status: m.State, LogBytes: m.LogBytesStreamed}
		if js != nil {
			s.RunID = js.entry.RunID
		}
		if m.Data != nil {
			s.ExitCode = m.Data.ExitCode
			s.ErrorMessage = m.Data.Error
			if m.State != status.StepRunning && m.State != status.StepPending {
				dur := m.Data.DurationMs
				s.DurationMs = &dur
			}
		}
		if m.State == status.StepRunning {
			s.StartedAt = &now
		} else if m.State != status.StepPending {
			s.CompletedAt = &now
		}
		if ev := fr.ev(); ev != nil {
			if err := ev.StepStatus(ctx, s); err != nil {
				fr.log.Warn("step status", "job", jobID, "err", err)
			}
		}
	case *protocol.LogChunk:
		fr.logChunk(c, js, jobID, m)
	case *protocol.JobHeartbeat:
		if err := fr.st.TouchJobHeartbeat(ctx, jobID, now); err != nil {
			fr.log.Debug("job heartbeat", "job", jobID, "err", err)
		}
	}
}

// jobStatus applies job.status: running marks the job started (and acks);
// a terminal state completes the queue entry exactly once, reports the
// result, frees the agent's slot and drains.
func (fr *frameHandler) jobStatus(ctx context.Context, c *agentConn, js *jobState, jobID string, m *protocol.JobStatus, now time.Time) {
	switch m.State {
	case status.JobRunning:
		if fr.reg.startedOrDone(js) {
			return
		}
		if fr.reg.markAcked(c, js, true) {
			_ = fr.st.AckQueueEntry(ctx, jobID, c.id)
		}
		if ev := fr.ev(); ev != nil {
			if err := ev.JobStarted(ctx, jobID, c.id, now); err != nil {
				fr.log.Warn("job started event", "job", jobID, "err", err)
			}
		}
	case status.JobSuccess, status.JobFailed, status.JobCancelled:
		freed := fr.reg.finishTracked(js)
		changed, err := fr.st.SetQueueStatus(ctx, jobID, []string{store.QueueDispatched}, store.QueueCompleted)
		if err != nil {
			fr.log.Error("complete queue entry", "job", jobID, "err", err)
		}
		if !changed && err == nil {
			changed = fr.unfinishedAfterQueue(ctx, c, jobID)
		}
		stored := false
		if changed {
			errMsg := ""
			if m.Data != nil {
				errMsg = m.Data.Error
			}
			fr.log.Info("job finished", "job", jobID, "agent", c.id, "status", m.State)
			fr.storeOutputs(ctx, jobID, m.Data)
			stored = fr.finishJob(ctx, jobID, m.State, errMsg)
		}
		if !fr.ackStatus(ctx, c, jobID, m, changed, stored) {
			return
		}
		// A scaler-spawned agent's session is its one job.
		fr.reg.endEphemeralSession(ctx, c, "its job ended")
		if freed {
			fr.q.drain(ctx, c)
			fr.q.kickRedrive()
		}
	default:
		// cancelling, pending, queued, skipped: informational only.
	}
}

// unfinishedAfterQueue reports whether a terminal status whose queue entry
// was already completed must still be applied: a node completes the queue
// entry, then writes the job, and one killed between the two writes left
// the job running with its queue entry completed. The agent replays its
// terminal status after reconnecting (to this node or another); without
// this the replay found the entry completed, changed nothing, and the job
// ended timed_out_stale. The job must be this agent's and not terminal;
// the tracker applies a terminal status once. The entry must be completed,
// the mark of an agent's status: one failed by AbortJob (a timeout, a
// cancel) is finished by its caller with its own status, not the agent's.
func (fr *frameHandler) unfinishedAfterQueue(ctx context.Context, c *agentConn, jobID string) bool {
	job, err := fr.st.GetJob(ctx, jobID)
	if err != nil || job.Status.IsTerminal() || job.AgentID != c.id {
		return false
	}
	// completed → completed: true exactly when the entry is completed (the
	// store has no single-entry read; this path runs only on replays).
	if completed, err := fr.st.SetQueueStatus(ctx, jobID, []string{store.QueueCompleted}, store.QueueCompleted); err != nil || !completed {
		return false
	}
	fr.log.Warn("applying a replayed terminal status the queue already recorded (the node that took it stopped before writing the job)", "job", jobID, "agent", c.id, "jobStatus", job.Status)
	return true
}

// ackStatus answers a terminal job.status with job.status.ack, for an
// agent that negotiated StatusAcks; the agent then stops resending it.
// applied says this node wrote the status: it is acknowledged once the job
// is terminal in the store, and when it could not be stored the socket is
// closed instead (false): the agent reconnects, to this node or another,
// and sends the status again, as it does for unacknowledged log lines. A
// status this node did not apply (the job was already finished, or aborted
// by a timeout or cancel whose caller finishes it) is acknowledged as is.
// stored says the tracker reported the job terminal in the store (its
// JobFinished returned nil), so the job need not be read back to know it
// (a round trip less per job on PostgreSQL); the acknowledgement then
// names the run the agent's status named, which the agent does not match
// on (it matches the job and the state).
func (fr *frameHandler) ackStatus(ctx context.Context, c *agentConn, jobID string, m *protocol.JobStatus, applied, stored bool) bool {
	if !c.statusAcks {
		return true
	}
	runID := m.RunID
	if applied && !stored {
		job, err := fr.st.GetJob(ctx, jobID)
		if err != nil || !job.Status.IsTerminal() {
			fr.log.Warn("terminal job status not stored; closing the socket so the agent sends it again", "job", jobID, "agent", c.id, "err", err)
			c.close(protocol.CloseInternalError, "job status not stored; send it again")
			return false
		}
		runID = job.RunID
	}
	if err := c.send(&protocol.JobStatusAck{Type: protocol.TypeJobStatusAck, RunID: runID, JobID: jobID, State: m.State}); err != nil {
		fr.log.Debug("job status ack", "job", jobID, "err", err)
	}
	return true
}
