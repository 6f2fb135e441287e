package dispatch

// The agent registry: sockets, registration sessions and the job→agent
// ownership with the agents' slots.

import (
	"sort"
	"sync"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// registry owns the agent sockets (handshake.go, register.go, session.go,
// disconnect.go) and the jobs handed to them (jobState, the ownership rule
// of messages.go, recovery.go). Every field below mu, and the
// registration fields of agentConn and the fields of jobState, are guarded
// by mu. It calls into the queue (draining an agent, requeueing a lost
// job) and the frame handler (serving a registered agent, reporting a
// finished job) only without mu held.
type registry struct {
	*core
	agentAuth *auth.AgentAuth
	// shared keeps agent sessions for the cluster (session.go), as node
	// nodeID; nil on a single node.
	shared SharedSessions
	nodeID string
	// spawner hears of scaler-managed agents registering and leaving;
	// nil without auto-scaling.
	spawner Spawner
	// ackObserver records dispatch latency (observe.go); called under mu.
	ackObserver AckObserver

	q  *jobQueue
	fr *frameHandler

	mu     sync.Mutex
	agents map[string]*agentConn // registered agents by id
	jobs   map[string]*jobState  // jobs handed to agents, by job id
	conns  map[*agentConn]bool   // every open socket (registered or not)
	// sessions are the agents' registration sessions by agent id (session.go).
	sessions map[string]*agentSession
	closed   bool
	// handlers counts the running connection handlers (ServeHTTP).
	handlers sync.WaitGroup
}

// jobState is the dispatcher's view of a job handed to an agent.
type jobState struct {
	entry   store.QueueEntry
	agentID string
	// session is the resume token of the agent session the job was
	// dispatched to or adopted by: only a socket of that session (the
	// agent itself, reconnected with its resume token) reports for it, not
	// another socket that registered the same agent id.
	session   string
	started   bool
	acked     bool
	holdsSlot bool
	ackTimer  *time.Timer
	done      bool
	doneAt    time.Time
	lastSeq   int64
	// recoverBy is set while the job's static agent is disconnected: the
	// job fails if the agent has not reclaimed it by then.
	recoverBy time.Time
}

// close marks the registry closed, stops every ack timer and returns the
// open sockets for the caller to close; ok is false when it was closed
// already.
func (r *registry) close() (conns []*agentConn, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, false
	}
	r.closed = true
	conns = make([]*agentConn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	for _, js := range r.jobs {
		if js.ackTimer != nil {
			js.ackTimer.Stop()
		}
	}
	return conns, true
}

// list returns the registered agents, sorted by id.
func (r *registry) list() []AgentInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]AgentInfo, 0, len(r.agents))
	for _, a := range r.agents {
		info := AgentInfo{
			ID: a.id, Labels: append([]string(nil), a.labels...), ScalerManaged: a.scalerManaged,
			Ephemeral: a.ephemeral, MaxConcurrency: a.maxConc, ActiveJobs: a.active,
			Version: a.version, Hostname: a.hostname, ConnectedAt: a.connectedAt, LastSeenAt: a.lastSeen,
			JobIDs: []string{},
		}
		for id, js := range r.jobs {
			if js.agentID == a.id && !js.done {
				info.JobIDs = append(info.JobIDs, id)
			}
		}
		sort.Strings(info.JobIDs)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// pruneDone forgets finished jobs past the ownership grace.
func (r *registry) pruneDone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, js := range r.jobs {
		if js.done && time.Since(js.doneAt) > ownershipGrace {
			delete(r.jobs, id)
		}
	}
}

// checkHeartbeats closes registered agents silent for HeartbeatTimeout with
// 4004; their handler then runs the disconnect triage.
func (r *registry) checkHeartbeats() {
	r.mu.Lock()
	var stale []*agentConn
	now := time.Now()
	for _, a := range r.agents {
		if silent := now.Sub(a.lastSeen); silent > r.cfg.HeartbeatTimeout {
			stale = append(stale, a)
		} else if silent > r.cfg.HeartbeatTimeout/2 {
			r.log.Warn("agent unhealthy: no heartbeat", "agent", a.id, "silentFor", silent.Round(time.Second))
		}
	}
	r.mu.Unlock()
	for _, a := range stale {
		r.log.Warn("agent heartbeat timeout", "agent", a.id)
		a.close(protocol.CloseHeartbeatTimeout, "heartbeat timeout")
	}
}

// hasAgent reports whether agent id is registered on this node.
func (r *registry) hasAgent(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents[id] != nil
}

func (r *registry) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// noteAgentStatus records an agent's drain flag from agent.status: a
// draining agent (SIGUSR1, or a single-use agent after its job) is handed
// no new job (once draining is announced, no assignment).
func (r *registry) noteAgentStatus(c *agentConn, m *protocol.AgentStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Draining && !c.closing {
		r.log.Info("agent draining", "agent", c.id)
	}
	c.closing = m.Draining
}
