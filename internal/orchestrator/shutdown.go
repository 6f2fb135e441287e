package orchestrator

import (
	"context"
	"time"
)

// otherLiveNode returns the id of another node of the cluster that
// heartbeated within membership.NodeLiveFor, or "" when this node is alone (single
// node, the others dead, or the registry unreadable: then nothing is
// handed over, the safe side).
func (s *Server) otherLiveNode(ctx context.Context) string {
	if s.peers == nil {
		return ""
	}
	others, err := s.node.OtherLiveNodes(ctx)
	if err != nil {
		s.log.Warn("stopping: node registry unreadable; spawned agents are stopped, not handed over", "err", err)
		return ""
	}
	if len(others) == 0 {
		return ""
	}
	return others[0].ID
}

// shutdownScaler stops the agents this node spawned. With handOver set
// (another node lives), those running a job are released instead
// (scaler.Manager.HandOver): they keep running, reconnect to another node
// once this node's sockets close, finish their job there with its real
// status and exit; the rest are destroyed. Otherwise every spawned agent
// is stopped and cancels its running job ("agent shutting down").
func (s *Server) shutdownScaler(ctx context.Context) {
	if !s.handOver.Load() {
		s.scaler.Shutdown(ctx)
		return
	}
	kept := s.scaler.HandOver(ctx)
	if len(kept) > 0 {
		s.log.Info("stopping: spawned agents running a job handed over to the other nodes", "agents", kept)
	}
}

// drainPoll is how often the drain before stop looks at the running jobs.
const drainPoll = 100 * time.Millisecond

// drainBeforeStop is the first step of a graceful stop (SIGTERM): the node
// drains, whatever the registry's flag says (heartbeat keeps it so), so
// new jobs stay queued for the other nodes or for this node's restart,
// and it waits up to KICI_SHUTDOWN_GRACE_MS for the jobs running on its
// agents, spawned and static, to finish and report. ctx is the node's
// loops' context, still live: heartbeats go on during the wait, so the
// registry shows the node's falling count. A job still running when the
// grace ends is left to the rest of the stop: a static agent fails over
// to another node with it, and so does a spawned agent when another node
// lives (shutdownScaler); alone, a spawned agent is stopped and cancels it.
func (s *Server) drainBeforeStop(ctx context.Context) {
	grace := s.cfg.ShutdownGrace
	s.stopping.Store(true)
	s.runctl.SetDraining(true)
	s.node.Beat(ctx)
	running := s.dispatcher.JobsRunning()
	if grace <= 0 {
		return
	}
	if running == 0 {
		// Said even with nothing to wait for, so that whoever stopped the
		// node (a pod deletion, a rolling update) sees in its log that it
		// drained.
		s.log.Info("stopping: drained, no job running")
		return
	}
	s.log.Info("stopping: draining first; running jobs finish before the node stops", "jobsRunning", running, "grace", grace)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for s.dispatcher.JobsRunning() > 0 {
		select {
		case <-deadline.C:
			s.log.Warn("stopping: shutdown grace (KICI_SHUTDOWN_GRACE_MS) over with jobs still running; agents fail over to other nodes with their jobs (alone, jobs of agents this node spawned are cancelled)",
				"jobsRunning", s.dispatcher.JobsRunning(), "grace", grace)
			return
		case <-tick.C:
		}
	}
	s.log.Info("stopping: drained, no job running")
}
