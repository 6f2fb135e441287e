package orchestrator

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/agentsessions"
	"kici.dev/kici/internal/clusterbus"
	"kici.dev/kici/internal/config"
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

// peers connects this node's dispatcher to the other nodes of the cluster
// (dispatch.Peers) over the cluster bus: enqueue wake-ups and cancels of
// jobs whose agent is connected elsewhere; and to the agent sessions they
// share.
type peers struct {
	runs.NopSubscriber // wakes the other nodes for released jobs (JobReady)

	bus      *clusterbus.Bus
	sessions *agentsessions.Store // agent sessions every node verifies
	log      *slog.Logger
	ctx      context.Context

	mu      sync.Mutex
	waiting map[string]chan struct{} // cancel requests awaiting an answer, by id
}

// setupPeers opens the cluster bus and the shared agent sessions on a
// PostgreSQL database (nil, nil on the embedded SQLite default: one node,
// nobody to talk to). The dispatcher takes both (dispatch.Deps); serve then
// answers the other nodes with it.
func setupPeers(ctx context.Context, cfg *config.Config, nodeID string, logger *slog.Logger) (*peers, error) {
	if cfg.DatabaseURL == "" {
		return nil, nil
	}
	bus, err := clusterbus.Open(ctx, cfg.DatabaseURL, nodeID, logger)
	if err != nil {
		return nil, err
	}
	sessions, err := agentsessions.Open(ctx, cfg.DatabaseURL, 3*HeartbeatInterval)
	if err != nil {
		bus.Close()
		return nil, err
	}
	return &peers{bus: bus, sessions: sessions, log: logger, ctx: context.WithoutCancel(ctx), waiting: map[string]chan struct{}{}}, nil
}

// serve subscribes to the other nodes' messages: enqueue wake-ups and
// cancels are carried out by d, this node's dispatcher. Called once, right
// after d is built.
func (p *peers) serve(d *dispatch.Dispatcher) {
	p.bus.Handle(msgJobEnqueued, func(m clusterbus.Message) { d.WakeForJob(p.ctx, m.Body) })
	p.bus.Handle(msgJobCancel, func(m clusterbus.Message) { p.onCancel(d, m) })
	p.bus.Handle(msgJobCancelSent, p.onCancelSent)
}

// Enqueued tells the other nodes that jobID waits in the queue, so a node
// with an idle fitting agent dispatches it now.
func (p *peers) Enqueued(ctx context.Context, jobID string) {
	if err := p.bus.Publish(ctx, msgJobEnqueued, jobID); err != nil {
		p.log.Warn("enqueue wake-up not sent; other nodes see the job at their next queue resync", "job", jobID, "err", err)
	}
}

// JobReady implements runs.Subscriber: once dispatch queued a released
// job, the other nodes are woken (Enqueued); one with an idle fitting
// agent dispatches it now.
func (p *peers) JobReady(ctx context.Context, job *store.Job) error {
	p.Enqueued(ctx, job.ID)
	return nil
}

// CancelJob implements dispatch.Peers.
func (p *peers) CancelJob(jobID, reason string, force, wait bool) bool {
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
func (p *peers) onCancel(d *dispatch.Dispatcher, m clusterbus.Message) {
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

func (p *peers) onCancelSent(m clusterbus.Message) {
	p.mu.Lock()
	ch := p.waiting[m.Body]
	delete(p.waiting, m.Body)
	p.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Close stops the bus and closes the session store.
func (p *peers) Close() {
	p.bus.Close()
	p.sessions.Close()
}
