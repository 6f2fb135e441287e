package orchestrator

import "kici.dev/kici/internal/servermetrics"

// subscribe registers the components built on the tracker for its run and
// job lifecycle (runs.Subscriber), once all of them exist and before the
// server runs. The order is the order each event reaches them:
//   - a finished run: the resumer (held work waiting on a slot), metrics,
//     run control (concurrency groups), then the pipeline
//     (workflow_complete events);
//   - a finished job: metrics, the pipeline (job_complete events), then
//     the forge reporter (its check runs);
//   - a released job: the forge reporter (its check is created "queued"
//     before an agent picks the job up), the dispatcher (queued for an
//     agent), then, in a cluster, the other nodes' wake-up (one with an
//     idle fitting agent dispatches it now); a failed enqueue wakes nobody;
//   - admission: run control (workflow concurrency groups); the others
//     admit every run.
func (s *Server) subscribe(sm *servermetrics.Metrics) {
	s.tracker.Subscribe(s.resumer, sm, s.runctl, s.processor, s.reporter, s.dispatcher)
	if s.peers != nil {
		s.tracker.Subscribe(s.peers)
	}
}
