package dispatch

import "time"

// AckObserver receives, for each dispatched job the first time its agent
// acknowledges it (job.ack or job.status running), how long the job waited
// from entering the queue (ready) until that acknowledgement, with the
// job's runsOn labels. It runs under a dispatcher lock: it must only
// record (a histogram observation), never block.
type AckObserver func(runsOn []string, readyToAck time.Duration)

// observeAckLocked reports js's dispatch latency. Caller holds registry.mu.
func (r *registry) observeAckLocked(js *jobState) {
	if r.ackObserver != nil && !js.entry.CreatedAt.IsZero() {
		r.ackObserver(js.entry.RunsOnLabels, time.Since(js.entry.CreatedAt))
	}
}

// count is the number of registered agents.
func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.agents)
}
