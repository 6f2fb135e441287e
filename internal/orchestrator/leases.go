package orchestrator

import (
	"context"

	"kici.dev/kici/internal/retention"
)

// releaseLeases drops the scheduler and retention leases this node holds,
// on a graceful stop, so another node (or this one restarted) takes them
// at its next tick instead of after their TTL.
func (s *Server) releaseLeases(ctx context.Context) {
	s.ingress.sched.Release(ctx)
	if err := s.store.ReleaseLease(ctx, retention.LeaseName, s.nodeID); err != nil {
		s.log.Warn("release retention lease", "err", err)
	}
}
