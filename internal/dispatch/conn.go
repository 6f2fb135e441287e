package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"kici.dev/kici/internal/execution/status"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// agentConn is one agent socket. Fields below mu-comment are guarded by
// Dispatcher.mu.
type agentConn struct {
	ws        *websocket.Conn
	closeOnce sync.Once
	closeDone chan struct{} // closed when the close handshake ended
	sendMu    sync.Mutex    // orders frames (register.ack before any dispatch)

	// guarded by Dispatcher.mu
	id            string
	tokenID       string
	labels        []string
	mandatory     []string // the token's mandatory labels (kick.go)
	ephemeral     bool
	scalerManaged bool
	maxConc       int
	active        int // slots in use (reserved or running)
	served        int // jobs ever handed to this socket
	version       string
	hostname      string
	connectedAt   time.Time
	lastSeen      time.Time
	violations    []time.Time
	closing       bool
	ready         bool   // register.ack sent: may receive dispatches
	evicted       bool   // unregistered by an ack timeout
	replaced      bool   // superseded by a newer socket of the same agent
	resume        string // this socket's session resume token (session.go)

	logs *logBatch // log lines read, not yet written (logs.go); message loop only
}

// send writes one JSON message (10 s write timeout).
func (a *agentConn) send(msg any) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	return a.sendLocked(msg)
}

// sendLocked is send for a caller holding sendMu.
func (a *agentConn) sendLocked(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.ws.Write(ctx, websocket.MessageText, b)
}

// close closes the socket once with code and reason (truncated to 123
// bytes), without blocking the caller on the close handshake.
func (a *agentConn) close(code int, reason string) {
	a.closeOnce.Do(func() {
		go func() {
			_ = a.ws.Close(websocket.StatusCode(code), truncateReason(reason))
			close(a.closeDone)
		}()
	})
}

// truncateReason cuts a close reason to at most 123 bytes (RFC 6455 control
// frame limit) without splitting a UTF-8 character.
func truncateReason(s string) string {
	const max = 123
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// ServeHTTP upgrades GET /ws to the agent channel and runs the connection:
// handshake (auth.request within AuthTimeout, agent.register within
// RegisterTimeout), then the registered message loop, then disconnect
// triage.
func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.isClosed() {
		http.Error(w, "orchestrator shutting down", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		d.log.Debug("websocket accept", "err", err)
		return
	}
	// Until the agent has authenticated and registered, a frame may be at
	// most PreAuthFrameBytes: an unauthenticated peer must not make the
	// orchestrator buffer 25 MiB frames.
	ws.SetReadLimit(PreAuthFrameBytes)
	c := &agentConn{ws: ws, closeDone: make(chan struct{}), connectedAt: time.Now().UTC(), lastSeen: time.Now().UTC(), maxConc: 1}

	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		_ = ws.Close(websocket.StatusCode(protocol.CloseGoingAway), "orchestrator shutting down")
		return
	}
	d.conns[c] = true
	d.handlers.Add(1)
	d.mu.Unlock()
	defer d.handlers.Done()

	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	frames := make(chan []byte)
	readDone := make(chan error, 1)
	go func() {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				readDone <- err
				return
			}
			select {
			case frames <- b:
			case <-ctx.Done():
				readDone <- ctx.Err()
				return
			}
		}
	}()

	tok := d.handshake(ctx, c, frames, readDone)
	if tok != nil {
		ws.SetReadLimit(protocol.MaxFrameBytes)
		d.serveRegistered(ctx, c, tok, frames, readDone)
	}
	c.close(protocol.CloseNormal, "")
	// Let the close frame go out before the read context is cancelled
	// (cancelling a read tears the connection down without a close frame).
	<-c.closeDone
	cancel()
	d.onDisconnect(c)
}

// next waits for one frame until timeout. ok=false when the socket ended
// (or, with timedOut, the timer fired).
func next(frames <-chan []byte, readDone <-chan error, timeout time.Duration) (frame []byte, timedOut, ok bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case b := <-frames:
		return b, false, true
	case <-readDone:
		return nil, false, false
	case <-t.C:
		return nil, true, false
	}
}

// PreAuthFrameBytes caps a frame before the handshake completes: 64 KiB,
// plenty for auth.request and agent.register.
const PreAuthFrameBytes = 64 << 10

// handshake runs auth and the first registration; it returns the agent's
// token when the agent is registered, else nil (the socket is closing).
func (d *Dispatcher) handshake(ctx context.Context, c *agentConn, frames <-chan []byte, readDone <-chan error) *store.AgentToken {
	frame, timedOut, ok := next(frames, readDone, d.cfg.AuthTimeout)
	if !ok {
		if timedOut {
			c.close(protocol.CloseAuthTimeout, "authentication timeout")
		}
		return nil
	}
	msg, err := protocol.Decode(frame)
	req, isAuth := msg.(*protocol.AuthRequest)
	if err != nil || !isAuth {
		d.authFail(c, protocol.CloseAuthFailed, "expected auth.request")
		return nil
	}
	// KiCI accepts any version at or above its minimum; a version newer
	// than this build speaks is refused too, since its messages may mean
	// what this build cannot honour.
	if req.ProtocolVersion < protocol.MinVersion || req.ProtocolVersion > protocol.Version {
		d.authFail(c, protocol.CloseProtocolError,
			fmt.Sprintf("unsupported protocol version %d (supported %d to %d)", req.ProtocolVersion, protocol.MinVersion, protocol.Version))
		return nil
	}
	tok, err := d.agentAuth.Validate(ctx, req.Token)
	if err != nil {
		if errors.Is(err, auth.ErrInvalidToken) {
			d.log.Warn("agent authentication failed", "err", err)
			d.authFail(c, protocol.CloseAuthFailed, "authentication failed: "+strings.TrimPrefix(err.Error(), auth.ErrInvalidToken.Error()+": "))
		} else {
			// A store failure is not the agent's fault: let it retry.
			d.log.Error("agent token lookup", "err", err)
			c.close(protocol.CloseInternalError, "authentication unavailable")
		}
		return nil
	}
	if !d.watchToken(ctx, c, tok) {
		return nil
	}
	if err := c.send(&protocol.AuthSuccess{Type: protocol.TypeAuthSuccess, ConnectionID: uuid.NewString()}); err != nil {
		return nil
	}

	frame, timedOut, ok = next(frames, readDone, d.cfg.RegisterTimeout)
	if !ok {
		if timedOut {
			c.close(protocol.CloseAuthTimeout, "registration timeout")
		}
		return nil
	}
	msg, err = protocol.Decode(frame)
	reg, isReg := msg.(*protocol.AgentRegister)
	if err != nil || !isReg {
		d.invalid(c, "expected agent.register")
		return nil
	}
	if !d.register(ctx, c, tok, reg) {
		return nil
	}
	return tok
}

// authFail sends auth.failure and closes with code.
func (d *Dispatcher) authFail(c *agentConn, code int, reason string) {
	_ = c.send(&protocol.AuthFailure{Type: protocol.TypeAuthFailure, Reason: reason})
	c.close(code, reason)
}

// invalid sends an INVALID_MESSAGE error frame and closes with 4003.
func (d *Dispatcher) invalid(c *agentConn, why string) {
	_ = c.send(&protocol.ErrorMessage{Type: protocol.TypeErrorMessage, Code: "INVALID_MESSAGE", Message: why})
	c.close(protocol.CloseInvalidMessage, why)
}

// isPlatformLabel reports whether l is a self-reported platform label that
// a token's label scope does not restrict.
func isPlatformLabel(l string) bool {
	return strings.HasPrefix(l, "kici:os:") || strings.HasPrefix(l, "kici:arch:") || strings.HasPrefix(l, "kici:host:")
}

// validAgentID accepts 1–128 printable, non-blank ASCII characters.
func validAgentID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// register applies the register-time gates (label scope, ephemeral binding,
// id collision), installs the agent in the registry (replacing an older
// socket of the same agent and token), reconciles in-flight jobs, sends
// register.ack and drains the queue for it. It reports whether the agent is
// registered; on false the socket is closing.
func (d *Dispatcher) register(ctx context.Context, c *agentConn, tok *store.AgentToken, reg *protocol.AgentRegister) bool {
	if !validAgentID(reg.AgentID) {
		d.invalid(c, "invalid agentId")
		return false
	}
	if tok.Labels != nil {
		for _, l := range reg.Labels {
			if !isPlatformLabel(l) && !slices.Contains(tok.Labels, l) {
				c.close(protocol.CloseAuthFailed, fmt.Sprintf("label %q is outside the token's label scope", l))
				return false
			}
		}
	}
	if tok.Kind == store.AgentTokenEphemeral && tok.BoundAgentID != reg.AgentID {
		c.close(protocol.CloseAuthFailed, "token is bound to another agent id")
		return false
	}

	// routeMu: no reservation may be in flight while slots are recounted.
	d.routeMu.Lock()
	d.mu.Lock()
	if c.id != "" && c.id != reg.AgentID {
		d.mu.Unlock()
		d.routeMu.Unlock()
		d.invalid(c, "agent id changed on a registered socket")
		return false
	}
	var old *agentConn
	cur := d.agents[reg.AgentID]
	// A re-registration on the same socket continues its session; from
	// another socket only the session's resume token does (session.go).
	resumed := cur == c || d.resumesLocked(reg.AgentID, tok.ID, reg.ResumeToken)
	if cur != nil && cur != c {
		if cur.tokenID != tok.ID {
			d.mu.Unlock()
			d.routeMu.Unlock()
			c.close(protocol.CloseInvalidMessage, "agent id already connected with another token")
			return false
		}
		if !resumed {
			d.mu.Unlock()
			d.routeMu.Unlock()
			d.log.Warn("refusing a second connection for a live agent id without its resume token", "agent", reg.AgentID)
			c.close(protocol.CloseInvalidMessage, "agent id already connected; a reconnect must present its session's resume token")
			return false
		}
		old = cur
		old.replaced = true
	}
	// A new session for an id whose previous session this process knows
	// reclaims none of that session's jobs: they are lost.
	claims := resumed || !d.knownSessionLocked(reg.AgentID)
	switch {
	case cur == c:
	case resumed:
		c.resume = reg.ResumeToken
	default:
		c.resume = d.startSessionLocked(reg.AgentID, tok.ID)
	}
	c.id = reg.AgentID
	c.tokenID = tok.ID
	c.labels = withMandatory(reg.Labels, c.mandatory)
	c.scalerManaged = reg.ScalerManaged || tok.Kind == store.AgentTokenEphemeral
	c.ephemeral = tok.Kind == store.AgentTokenEphemeral
	c.version = reg.Version
	c.hostname = reg.Hostname
	c.lastSeen = time.Now().UTC()
	if reg.MaxConcurrency > 0 {
		c.maxConc = reg.MaxConcurrency
	}
	d.agents[c.id] = c
	// Reconcile jobs this agent id owns: those it still runs (or that are
	// dispatched and awaiting its ack) hold a slot; others stay owned for
	// late statuses but free their slot.
	inFlight := map[string]bool{}
	for _, j := range reg.InFlightJobs {
		if claims {
			inFlight[j.JobID] = true
		}
	}
	c.active = 0
	var reclaimed, lost []string
	for id, js := range d.jobs {
		if js.agentID != c.id || js.done {
			continue
		}
		js.holdsSlot = !js.started || inFlight[id]
		reclaimed, lost = js.reconcile(id, inFlight[id], reclaimed, lost)
		if js.holdsSlot {
			c.active++
			c.served++
		}
		delete(inFlight, id)
	}
	d.mu.Unlock()
	d.routeMu.Unlock()
	if old != nil {
		d.log.Info("agent socket replaced", "agent", c.id)
		old.close(protocol.CloseNormal, "replaced by a newer connection")
	}
	for jobID := range inFlight {
		d.adopt(ctx, c, jobID)
	}
	d.settleReconnect(ctx, c.id, reclaimed, lost)

	pending := d.boundJob(ctx, c) != ""
	// Raise the frame cap before the ack goes out: an agent with a backlog
	// answers the ack at once with a full-size log chunk, and the reader
	// takes a frame's cap when its header arrives, which could otherwise
	// be before serveAgent raised it (the connection then died on the
	// pre-auth cap and the agent's job failed as lost).
	c.ws.SetReadLimit(protocol.MaxFrameBytes)
	ack := &protocol.RegisterAck{Type: protocol.TypeRegisterAck, AgentID: c.id, Labels: c.labels,
		ScalerManaged: c.scalerManaged, PendingDispatch: pending, ResumeToken: c.resume,
		LogAcks: reg.LogAcks && d.offsetSink() != nil}
	// The agent becomes dispatchable as the ack is written; holding sendMu
	// keeps any job.dispatch behind the ack on the wire.
	d.registering.Add(1)
	defer d.registering.Add(-1)
	c.sendMu.Lock()
	d.mu.Lock()
	c.ready = true
	d.mu.Unlock()
	err := c.sendLocked(ack)
	c.sendMu.Unlock()
	if err != nil {
		return false
	}
	d.log.Info("agent registered", "agent", c.id, "labels", c.labels, "scalerManaged", c.scalerManaged)
	d.drain(ctx, c)
	d.mu.Lock()
	delete(d.spawns, c.id)
	d.mu.Unlock()
	return true
}

// adopt resumes tracking of a job an agent reports in flight that this
// process does not track (e.g. after an orchestrator restart), when the
// store says the job runs on that agent.
func (d *Dispatcher) adopt(ctx context.Context, c *agentConn, jobID string) {
	job, err := d.st.GetJob(ctx, jobID)
	if err == nil && job.AgentID == "" && !job.Status.IsTerminal() {
		// Dispatched to this agent but not reported running before the
		// restart: the queue entry names the agent.
		if e, qerr := d.queueEntry(ctx, jobID, store.QueueDispatched); qerr == nil && e != nil && e.AgentID == c.id {
			job.AgentID = c.id
		}
	}
	if err != nil || job.AgentID != c.id || job.Status.IsTerminal() {
		d.log.Info("agent reports unknown in-flight job", "agent", c.id, "job", jobID)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jobs[jobID] != nil {
		return
	}
	d.jobs[jobID] = &jobState{entry: store.QueueEntry{ID: jobID, RunID: job.RunID, JobName: job.JobName,
		RunsOnLabels: job.RunsOnLabels}, agentID: c.id, started: true, acked: true, holdsSlot: true, lastSeq: -1}
	c.active++
	c.served++
	if job.Status == status.JobPending || job.Status == status.JobQueued || job.Status == status.JobRecovering {
		// The agent holds the job, so it has started it; its own "running"
		// report was lost with the previous orchestrator process, or the job
		// was waiting for this agent to come back.
		go d.markAdoptedStarted(jobID, c.id)
	}
}

// markAdoptedStarted records an adopted, not yet running job as started.
func (d *Dispatcher) markAdoptedStarted(jobID, agentID string) {
	ctx := d.ctx
	if err := d.st.AckQueueEntry(ctx, jobID, agentID); err != nil {
		d.log.Warn("ack adopted queue entry", "job", jobID, "err", err)
	}
	if ev := d.ev(); ev != nil {
		if err := ev.JobStarted(ctx, jobID, agentID, time.Now().UTC()); err != nil {
			d.log.Warn("job started event", "job", jobID, "err", err)
		}
	}
}

// serveRegistered is the message loop of a registered agent.
func (d *Dispatcher) serveRegistered(ctx context.Context, c *agentConn, tok *store.AgentToken, frames <-chan []byte, readDone <-chan error) {
	defer d.flushLogs(c)
	for {
		var frame []byte
		select {
		case frame = <-frames:
		default:
			// Nothing waiting: write the log lines read so far.
			if !d.flushLogs(c) {
				return
			}
			select {
			case frame = <-frames:
			case <-readDone:
				return
			}
		}
		d.mu.Lock()
		c.lastSeen = time.Now().UTC()
		d.mu.Unlock()
		msg, err := protocol.Decode(frame)
		if err != nil {
			if errors.Is(err, protocol.ErrUnknownType) {
				d.log.Debug("ignoring unknown agent message", "agent", c.id, "err", err)
				continue
			}
			d.invalid(c, "invalid message")
			return
		}
		if _, isLog := msg.(*protocol.LogChunk); !isLog && !d.flushLogs(c) {
			return // statuses only after the lines before them are stored
		}
		if !d.handle(ctx, c, tok, msg) {
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
func (d *Dispatcher) handle(ctx context.Context, c *agentConn, tok *store.AgentToken, msg any) bool {
	if jobID, scoped := jobRef(msg); scoped {
		if jobID == "" {
			d.invalid(c, "message has no jobId")
			return false
		}
		js, owned := d.owns(ctx, c, jobID)
		if !owned {
			d.refuseLogChunk(c, msg)
			return d.violation(c, jobID)
		}
		d.handleJobMessage(ctx, c, js, jobID, msg)
		return true
	}
	switch m := msg.(type) {
	case *protocol.Heartbeat:
		// lastSeen already refreshed
	case *protocol.AgentStatus:
		d.noteAgentStatus(c, m)
		d.drain(ctx, c)
	case *protocol.AgentRegister:
		return d.register(ctx, c, tok, m)
	case *protocol.ProvenanceAttest:
		return d.attest(ctx, c, m)
	default:
		d.log.Debug("ignoring unexpected message", "agent", c.id, "type", fmt.Sprintf("%T", msg))
	}
	return true
}

// owns applies the ownership rule: the job is tracked for this agent (also
// up to 30 s after it finished), or the store shows it terminal and not run
// by another agent. js is nil when only the store vouched.
func (d *Dispatcher) owns(ctx context.Context, c *agentConn, jobID string) (*jobState, bool) {
	d.mu.Lock()
	js := d.jobs[jobID]
	if js != nil && js.agentID == c.id && (!js.done || time.Since(js.doneAt) <= ownershipGrace) {
		d.mu.Unlock()
		return js, true
	}
	d.mu.Unlock()
	job, err := d.st.GetJob(ctx, jobID)
	if err != nil {
		return nil, false
	}
	if job.Status.IsTerminal() && (job.AgentID == "" || job.AgentID == c.id) {
		return nil, true
	}
	return nil, false
}

// violation records a message about a job the agent does not own; five
// within a minute close the socket with 1001.
func (d *Dispatcher) violation(c *agentConn, jobID string) bool {
	now := time.Now()
	d.mu.Lock()
	kept := c.violations[:0]
	for _, t := range c.violations {
		if now.Sub(t) < time.Minute {
			kept = append(kept, t)
		}
	}
	c.violations = append(kept, now)
	n := len(c.violations)
	d.mu.Unlock()
	d.log.Warn("dropping message for a job the agent does not own", "agent", c.id, "job", jobID, "violations", n)
	if n >= 5 {
		c.close(protocol.CloseGoingAway, "repeated job ownership violations")
		return false
	}
	return true
}

// handleJobMessage applies an owned job-scoped message.
func (d *Dispatcher) handleJobMessage(ctx context.Context, c *agentConn, js *jobState, jobID string, msg any) {
	now := time.Now().UTC()
	switch m := msg.(type) {
	case *protocol.JobAck:
		if d.markAcked(c, js, false) {
			if err := d.st.AckQueueEntry(ctx, jobID, c.id); err != nil {
				d.log.Warn("ack queue entry", "job", jobID, "err", err)
			}
		}
	case *protocol.JobReject:
		d.mu.Lock()
		if js == nil || js.done || js.started || d.jobs[jobID] != js {
			d.mu.Unlock()
			return
		}
		delete(d.jobs, jobID)
		if js.ackTimer != nil {
			js.ackTimer.Stop()
		}
		if js.holdsSlot {
			c.active--
			c.served--
		}
		d.mu.Unlock()
		d.log.Info("job rejected by agent", "job", jobID, "agent", c.id, "reason", m.Reason)
		d.requeueOrFail(ctx, jobID, &js.entry, "rejected by agent "+c.id+": "+m.Reason, c.id)
	case *protocol.JobStatus:
		d.jobStatus(ctx, c, js, jobID, m, now)
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
		if ev := d.ev(); ev != nil {
			if err := ev.StepStatus(ctx, s); err != nil {
				d.log.Warn("step status", "job", jobID, "err", err)
			}
		}
	case *protocol.LogChunk:
		d.logChunk(c, js, jobID, m)
	case *protocol.JobHeartbeat:
		if err := d.st.TouchJobHeartbeat(ctx, jobID, now); err != nil {
			d.log.Debug("job heartbeat", "job", jobID, "err", err)
		}
	}
}

// markAcked resolves the ack deadline of an owned, live job once. started
// also marks it running. It reports whether this call resolved the ack.
func (d *Dispatcher) markAcked(c *agentConn, js *jobState, started bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if js == nil || js.done || js.agentID != c.id {
		return false
	}
	first := !js.acked
	js.acked = true
	if first {
		d.observeAckLocked(js)
	}
	if started {
		js.started = true
	}
	if js.ackTimer != nil {
		js.ackTimer.Stop()
		js.ackTimer = nil
	}
	return first
}

// jobStatus applies job.status: running marks the job started (and acks);
// a terminal state completes the queue entry exactly once, reports the
// result, frees the agent's slot and drains.
func (d *Dispatcher) jobStatus(ctx context.Context, c *agentConn, js *jobState, jobID string, m *protocol.JobStatus, now time.Time) {
	switch m.State {
	case status.JobRunning:
		d.mu.Lock()
		already := js == nil || js.started || js.done
		d.mu.Unlock()
		if already {
			return
		}
		if d.markAcked(c, js, true) {
			_ = d.st.AckQueueEntry(ctx, jobID, c.id)
		}
		if ev := d.ev(); ev != nil {
			if err := ev.JobStarted(ctx, jobID, c.id, now); err != nil {
				d.log.Warn("job started event", "job", jobID, "err", err)
			}
		}
	case status.JobSuccess, status.JobFailed, status.JobCancelled:
		freed := false
		d.mu.Lock()
		if js != nil && !js.done {
			js.done = true
			js.doneAt = time.Now()
			if js.ackTimer != nil {
				js.ackTimer.Stop()
				js.ackTimer = nil
			}
			if js.holdsSlot {
				js.holdsSlot = false
				if a := d.agents[js.agentID]; a != nil {
					a.active--
				}
				freed = true
			}
		}
		d.mu.Unlock()
		changed, err := d.st.SetQueueStatus(ctx, jobID, []string{store.QueueDispatched}, store.QueueCompleted)
		if err != nil {
			d.log.Error("complete queue entry", "job", jobID, "err", err)
		}
		if changed {
			errMsg := ""
			if m.Data != nil {
				errMsg = m.Data.Error
			}
			d.log.Info("job finished", "job", jobID, "agent", c.id, "status", m.State)
			d.storeOutputs(ctx, jobID, m.Data)
			d.finishJob(ctx, jobID, m.State, errMsg)
		}
		// A scaler-spawned agent's session is its one job.
		d.endEphemeralSession(ctx, c, "its job ended")
		if freed {
			d.drain(ctx, c)
			d.kickRedrive()
		}
	default:
		// cancelling, pending, queued, skipped: informational only.
	}
}

// onDisconnect unregisters a closed socket and runs the disconnect triage
// described in the package documentation.
func (d *Dispatcher) onDisconnect(c *agentConn) {
	d.mu.Lock()
	delete(d.conns, c)
	if c.id == "" || c.replaced {
		d.mu.Unlock()
		return
	}
	current := d.agents[c.id] == c
	if current {
		delete(d.agents, c.id)
	}
	if d.closed || (!current && !c.evicted) {
		d.mu.Unlock()
		return
	}
	type lost struct {
		id    string
		entry store.QueueEntry
	}
	var requeue, fail []lost
	var recovering []string
	for id, js := range d.jobs {
		if js.agentID != c.id || js.done {
			continue
		}
		switch {
		case !js.started:
			if js.ackTimer != nil {
				js.ackTimer.Stop()
			}
			delete(d.jobs, id)
			requeue = append(requeue, lost{id, js.entry})
		case c.ephemeral || c.scalerManaged:
			delete(d.jobs, id)
			fail = append(fail, lost{id, js.entry})
		default:
			js.holdsSlot = false // owned until the agent returns
			js.recoverBy = time.Now().Add(d.cfg.RecoveryWindow)
			recovering = append(recovering, id)
		}
	}
	if len(recovering) == 0 && !c.ephemeral && d.sessions[c.id] != nil && d.sessions[c.id].tokenID == c.tokenID {
		delete(d.sessions, c.id) // nothing left to reclaim
	}
	d.mu.Unlock()
	d.log.Info("agent disconnected", "agent", c.id, "requeued", len(requeue), "failed", len(fail), "recovering", len(recovering))
	ctx := d.ctx
	// A scaler-spawned agent cannot come back: its token dies with the socket.
	d.endEphemeralSession(ctx, c, "agent disconnected")
	d.markRecovering(ctx, recovering)
	for _, l := range requeue {
		d.requeueOrFail(ctx, l.id, &l.entry, "agent "+c.id+" disconnected before starting the job", c.id)
	}
	for _, l := range fail {
		if _, err := d.st.SetQueueStatus(ctx, l.id, []string{store.QueueDispatched}, store.QueueFailed); err != nil {
			d.log.Error("fail queue entry", "job", l.id, "err", err)
		}
		d.finishJob(ctx, l.id, status.JobFailed, "agent lost: scaler-managed agent "+c.id+" disconnected mid-execution")
	}
}
