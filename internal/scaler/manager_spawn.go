package scaler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"kici.dev/kici/internal/protocol"
)

// runSpawn waits for a spawn slot, then runs backend.Spawn under the live
// spawn deadline. At the deadline the backend's context is cancelled and
// the slot and reservation are released even if the backend has not
// returned yet (a late success is destroyed).
func (m *Manager) runSpawn(rec *agentRec, ls *LabelSet) {
	defer m.spawnsWG.Done()
	sc := rec.sc
	entry := sc.entry
	ls = warmPodLabelSet(entry, ls, rec.warm)
	emit := func(t EventType, d string) { m.emit(rec, t, d) }
	emit(EventProvisioning, fmt.Sprintf("scaler %s (%s): agent %s reserved for job, waiting for a spawn slot", entry.Name, entry.Type, rec.id))

	actx, acancel := context.WithCancel(m.ctx)
	m.mu.Lock()
	rec.cancel = acancel
	stopped := rec.stop
	m.mu.Unlock()
	if stopped {
		acancel()
	}
	if err := sc.sem.Acquire(actx); err != nil {
		acancel()
		m.spawnFailed(rec, errors.New("spawn cancelled before it started"), false)
		return
	}
	timeout := m.opts.Settings.ScalerSpawnTimeout(m.ctx)
	ttl := m.opts.Settings.AgentTokenTTL(m.ctx)
	ctx, cancel := context.WithTimeout(actx, timeout)
	defer cancel()
	defer acancel()
	m.mu.Lock()
	rec.state = AgentSpawning
	sc.spawning++
	m.updateGaugesLocked()
	m.mu.Unlock()
	started := time.Now()

	done := make(chan error, 1)
	go func() {
		token, err := m.opts.Tokens.IssueEphemeralFor(ctx, rec.id, tokenScope(entry, ls), ttl)
		if err != nil {
			done <- fmt.Errorf("agent token: %w", err)
			return
		}
		emit(EventProvisioning, fmt.Sprintf("spawning agent %s (token ttl %s, spawn deadline %s)", rec.id, ttl, timeout))
		m.mu.Lock()
		url := entry.OrchestratorURL
		if url == "" {
			url = m.opts.OrchestratorURL
		}
		limits := m.cfg.Limits(ls)
		pendingFn := m.opts.PendingReason
		m.mu.Unlock()
		var job *JobContainers
		if entry.Type == TypeKubernetes && rec.jobID != "" && m.opts.JobContainers != nil {
			if job, err = m.opts.JobContainers(ctx, rec.jobID); err != nil {
				done <- fmt.Errorf("read the job's container and services: %w", err)
				return
			}
		}
		pending := func(reason string) {
			if pendingFn != nil && rec.jobID != "" {
				shown, _ := withholdHostDetails(reason)
				pendingFn(rec.jobID, shown)
			}
		}
		done <- sc.backend.Spawn(ctx, &SpawnRequest{AgentID: rec.id, JobID: rec.jobID, RunID: rec.runID,
			Entry: entry, LabelSet: ls, OrchestratorURL: url, Token: token, Limits: limits, Emit: emit, Warm: rec.warm,
			Job: job, Pending: pending})
	}()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-ctx.Done():
		timedOut = true
		go func() {
			// The backend saw the cancellation; if it still reports a
			// started agent, take it down.
			if e := <-done; e == nil {
				dctx, c := context.WithTimeout(context.Background(), 30*time.Second)
				_ = sc.backend.Destroy(dctx, rec.id)
				c()
			}
		}()
	}
	m.mu.Lock()
	sc.spawning--
	m.mu.Unlock()
	sc.sem.Release()
	if timedOut {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("spawn deadline of %s exceeded", timeout)
		default:
			err = errors.New("spawn cancelled")
		}
	}
	if err != nil {
		m.spawnFailed(rec, err, !timedOut || errors.Is(ctx.Err(), context.DeadlineExceeded))
		return
	}
	m.mu.Lock()
	rec.state = AgentRunning
	sc.spawned++
	stop := rec.stop
	m.updateGaugesLocked()
	m.mu.Unlock()
	m.opts.Metrics.spawned(entry, time.Since(started))
	emit(EventReady, fmt.Sprintf("agent %s started in %s", rec.id, time.Since(started).Round(time.Millisecond)))
	emit(EventConnecting, fmt.Sprintf("agent %s connecting to the orchestrator", rec.id))
	m.log.Info("agent spawned", "scaler", entry.Name, "agent", rec.id, "job", rec.jobID, "took", time.Since(started))
	if stop {
		m.destroy(rec)
	}
}

// spawnFailed releases a reservation whose spawn did not produce an agent,
// records the failure on the job (it becomes the pending reason until the
// retry backoff passes) and reports the exit.
func (m *Manager) spawnFailed(rec *agentRec, err error, record bool) {
	entry := rec.sc.entry
	msg := fmt.Sprintf("scaler %s: agent %s: %v", entry.Name, rec.id, err)
	m.mu.Lock()
	if m.agents[rec.id] != rec {
		m.mu.Unlock()
		return
	}
	delete(m.agents, rec.id)
	rec.sc.active--
	if record && !m.closed && !rec.stop && rec.jobID != "" {
		rec.sc.failed++
		until := time.Now().Add(m.opts.FailureBackoff)
		// The pending reason is shown to run readers: no host details.
		shown, _ := withholdHostDetails(msg)
		m.fails[rec.jobID] = failRec{msg: fmt.Sprintf("%s (next attempt after %s)", shown, until.UTC().Format("15:04:05Z")), until: until}
	}
	m.updateGaugesLocked()
	fn := m.opts.Exited
	m.mu.Unlock()
	if record {
		m.opts.Metrics.failure(entry)
	}
	m.revokeToken(rec.id)
	m.emit(rec, EventFailed, msg)
	m.log.Warn("agent spawn failed", "scaler", entry.Name, "agent", rec.id, "job", rec.jobID, "err", err)
	m.retireSweep()
	if fn != nil {
		fn(rec.id, err)
	}
}

// exitFor is the exit callback handed to scaler name's backend.
func (m *Manager) exitFor(name string) func(agentID string, err error) {
	return func(agentID string, err error) { m.agentExited(agentID, err) }
}

// agentExited releases an ended agent's reservation and reports the exit
// (capacity freed: the dispatcher re-drives pending jobs).
func (m *Manager) agentExited(agentID string, err error) {
	m.mu.Lock()
	rec := m.agents[agentID]
	if rec == nil || rec.state != AgentRunning {
		// Unknown, or a spawn still unwinding (runSpawn owns it).
		m.mu.Unlock()
		return
	}
	delete(m.agents, agentID)
	rec.sc.active--
	m.updateGaugesLocked()
	fn := m.opts.Exited
	m.mu.Unlock()
	m.revokeToken(agentID)
	detail := fmt.Sprintf("agent %s ended", agentID)
	if err != nil {
		detail += ": " + err.Error()
	}
	m.emit(rec, EventDestroyed, detail)
	m.retireSweep()
	m.kickWarm()
	if fn != nil {
		fn(agentID, err)
	}
}

// Stop destroys agent agentID (dispatch.Spawner: the agent did not
// register in time). A spawn still queued or in flight is cancelled.
func (m *Manager) Stop(agentID string) {
	m.stopFor(agentID, "stopped by the orchestrator: its job ended or was cancelled, or it did not register in time")
}

// stopFor is Stop with the reason a ReasonedDestroyer records.
func (m *Manager) stopFor(agentID, reason string) {
	m.mu.Lock()
	rec := m.agents[agentID]
	if rec == nil {
		m.mu.Unlock()
		return
	}
	rec.stop = true
	rec.stopReason = reason
	running := rec.state == AgentRunning
	cancel := rec.cancel
	m.mu.Unlock()
	if running {
		m.destroy(rec)
	} else if cancel != nil {
		cancel()
	}
}

func (m *Manager) destroy(rec *agentRec) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m.mu.Lock()
		reason := rec.stopReason
		m.mu.Unlock()
		var err error
		if rd, ok := rec.sc.backend.(ReasonedDestroyer); ok && reason != "" {
			err = rd.DestroyFor(ctx, rec.id, reason)
		} else {
			err = rec.sc.backend.Destroy(ctx, rec.id)
		}
		if err != nil {
			m.log.Warn("destroy agent", "agent", rec.id, "err", err)
		}
	}()
}

// emit records a lifecycle event in the job's provisioning log (the
// job-level log bucket, stream EventStream). Host paths and addresses are
// withheld from the job's copy (joblog.go) and kept on the orchestrator's
// log.
func (m *Manager) emit(rec *agentRec, eventType EventType, detail string) {
	if m.opts.Events == nil || rec.runID == "" || rec.jobID == "" {
		return
	}
	shown, withheld := withholdHostDetails(detail)
	if withheld {
		m.log.Info("provisioning event (host details withheld from the job log)", "job", rec.jobID, "agent", rec.id, "event", eventType, "detail", detail)
	}
	line := protocol.LogLine{Timestamp: time.Now().UnixMilli(), Stream: EventStream, Text: "[" + string(eventType) + "] " + shown}
	if err := m.opts.Events.Append(rec.runID, rec.jobID, -1, []protocol.LogLine{line}); err != nil {
		m.log.Warn("provisioning log", "job", rec.jobID, "err", err)
	}
}

// warmPodLabelSet returns ls, plus protocol.LabelWarmPod for a warm agent of a
// kubernetes scaler: the label reaches the agent (KICI_LABELS) and its
// token's label scope.
func warmPodLabelSet(entry *Entry, ls *LabelSet, warm bool) *LabelSet {
	if !warm || entry.Type != TypeKubernetes || ls == nil || slices.Contains(ls.Labels, protocol.LabelWarmPod) {
		return ls
	}
	c := *ls
	c.Labels = append(slices.Clone(ls.Labels), protocol.LabelWarmPod)
	return &c
}

// tokenScope is the label scope of the ephemeral token minted for an agent
// of ls: the set's labels and, for a bare-metal agent (it runs on this
// host), kici:host:<this host>, so that a job pinned to this host may
// receive its secrets there (jobs pinning kici:host:X get secrets only on
// an agent whose token lists the label; internal/jobdata).
func tokenScope(entry *Entry, ls *LabelSet) []string {
	if entry.Type != TypeBareMetal || ls.Labels == nil {
		return ls.Labels // nil stays unscoped
	}
	h, _ := os.Hostname()
	if h == "" || slices.Contains(ls.Labels, "kici:host:"+h) {
		return ls.Labels
	}
	return append(slices.Clone(ls.Labels), "kici:host:"+h)
}
