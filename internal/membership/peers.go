package membership

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/agentsessions"
	"kici.dev/kici/internal/clusterbus"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// Bus message kinds between the nodes of a cluster.
const (
	// msgJobEnqueued: body is a job id another node just enqueued.
	msgJobEnqueued = "job.enqueued"
	// msgJobCancel: body is a cancelRequest.
	msgJobCancel = "job.cancel"
	// msgJobCancelSent: body is the id of the cancelRequest whose frame
	// the answering node wrote to the job's agent.
	msgJobCancelSent = "job.cancel.sent"
	// msgDrainChanged: body is the node id whose drain flag changed, ""
	// for every node; the nodes concerned beat at once, applying it.
	msgDrainChanged = "node.drain"
	// msgNodeJoined: body is the id of a node that has just registered; the
	// others beat at once, counting it among the nodes to wake.
	msgNodeJoined = "node.joined"
)

// peerCancelWait bounds how long a cancel waits for the node holding the
// job's agent to answer; past it the job is treated as having no agent.
const peerCancelWait = 3 * time.Second

// cancelRequest asks the node holding a job's agent to cancel it.
type cancelRequest struct {
	ID     string `json:"id"`
	JobID  string `json:"jobId"`
	Reason string `json:"reason"`
	Force  bool   `json:"force"`
}

// Peers connects this node's dispatcher to the other nodes of the cluster
// (dispatch.Peers) over the cluster bus: enqueue wake-ups, cancels of jobs
// whose agent is connected elsewhere and drain changes; and to the agent
// sessions they share.
type Peers struct {
	runs.NopSubscriber // wakes the other nodes for released jobs (JobReady)

	bus      *clusterbus.Bus
	sessions *agentsessions.Store // agent sessions every node verifies
	log      *slog.Logger
	ctx      context.Context

	// others is how many other live nodes this node's last heartbeat
	// found; -1 until the first one (and after one failed to look), when
	// wake-ups are sent in any case.
	others atomic.Int32

	mu      sync.Mutex
	waiting map[string]chan struct{} // cancel requests awaiting an answer, by id
}

// OpenPeers opens the cluster bus and the shared agent sessions on the
// PostgreSQL database at databaseURL (nil, nil without one, on the embedded
// SQLite default: one node, nobody to talk to). The dispatcher takes both
// (dispatch.Deps, Sessions); Serve then answers the other nodes with it.
func OpenPeers(ctx context.Context, databaseURL, nodeID string, logger *slog.Logger) (*Peers, error) {
	if databaseURL == "" {
		return nil, nil
	}
	bus, err := clusterbus.Open(ctx, databaseURL, nodeID, logger)
	if err != nil {
		return nil, err
	}
	sessions, err := agentsessions.Open(ctx, databaseURL, NodeLiveFor)
	if err != nil {
		bus.Close()
		return nil, err
	}
	p := &Peers{bus: bus, sessions: sessions, log: logger, ctx: context.WithoutCancel(ctx), waiting: map[string]chan struct{}{}}
	p.others.Store(-1)
	return p, nil
}

// setOthers records how many other live nodes the registry holds (-1:
// unknown), as the node's heartbeat finds them.
func (p *Peers) setOthers(n int) { p.others.Store(int32(n)) }

// Sessions are the agent sessions every node verifies (dispatch.Deps).
func (p *Peers) Sessions() *agentsessions.Store { return p.sessions }

// Serve subscribes to the other nodes' messages: enqueue wake-ups and
// cancels are carried out by d, this node's dispatcher. Called once, right
// after d is built.
func (p *Peers) Serve(d *dispatch.Dispatcher) {
	p.bus.Handle(msgJobEnqueued, func(m clusterbus.Message) { d.WakeForJob(p.ctx, m.Body) })
	p.bus.Handle(msgJobCancel, func(m clusterbus.Message) { p.onCancel(d, m) })
	p.bus.Handle(msgJobCancelSent, p.onCancelSent)
}

// Enqueued tells the other nodes that jobID waits in the queue, so a node
// with an idle fitting agent dispatches it now. While the last heartbeat
// found no other live node it sends nothing, sparing the database a
// statement per job: a node that joined since sees the job when it merges
// the queue from the store (every 10 s, and at its start), and is woken
// from this node's next heartbeat on (HeartbeatInterval).
func (p *Peers) Enqueued(ctx context.Context, jobID string) {
	if p.others.Load() == 0 {
		return
	}
	if err := p.bus.Publish(ctx, msgJobEnqueued, jobID); err != nil {
		p.log.Warn("enqueue wake-up not sent; other nodes see the job at their next queue resync", "job", jobID, "err", err)
	}
}

// JobReady implements runs.Subscriber: once dispatch queued a released
// job, the other nodes are woken (Enqueued); one with an idle fitting
// agent dispatches it now.
func (p *Peers) JobReady(ctx context.Context, job *store.Job) error {
	p.Enqueued(ctx, job.ID)
	return nil
}

// Alone implements dispatch.Peers: the last heartbeat found no other live
// node (false until the first one).
func (p *Peers) Alone() bool { return p.others.Load() == 0 }

// CancelJob implements dispatch.Peers.
func (p *Peers) CancelJob(jobID, reason string, force, wait bool) bool {
	req := cancelRequest{ID: uuid.NewString(), JobID: jobID, Reason: reason, Force: force}
	body, _ := json.Marshal(req)
	answered := make(chan struct{})
	if wait {
		p.mu.Lock()
		p.waiting[req.ID] = answered
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.waiting, req.ID)
			p.mu.Unlock()
		}()
	}
	ctx, cancel := context.WithTimeout(p.ctx, peerCancelWait)
	defer cancel()
	if err := p.bus.Publish(ctx, msgJobCancel, string(body)); err != nil {
		p.log.Warn("cancel not sent to the other nodes", "job", jobID, "err", err)
		return false
	}
	if !wait {
		return false
	}
	select {
	case <-answered:
		return true
	case <-ctx.Done():
		return false
	}
}

// onCancel sends job.cancel when the job's agent is connected here, and
// says so to the asking node.
func (p *Peers) onCancel(d *dispatch.Dispatcher, m clusterbus.Message) {
	var req cancelRequest
	if json.Unmarshal([]byte(m.Body), &req) != nil || req.JobID == "" {
		return
	}
	if !d.CancelJobHere(req.JobID, req.Reason, req.Force) {
		return
	}
	p.log.Info("job cancel sent for another node", "job", req.JobID, "node", m.From, "force", req.Force)
	if err := p.bus.Publish(p.ctx, msgJobCancelSent, req.ID); err != nil {
		p.log.Warn("cancel answer not sent", "job", req.JobID, "err", err)
	}
}

func (p *Peers) onCancelSent(m clusterbus.Message) {
	p.mu.Lock()
	ch := p.waiting[m.Body]
	delete(p.waiting, m.Body)
	p.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Close stops the bus and closes the session store.
func (p *Peers) Close() {
	p.bus.Close()
	p.sessions.Close()
}
