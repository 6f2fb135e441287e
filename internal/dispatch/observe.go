package dispatch

import "time"

// AckObserver receives, for each dispatched job the first time its agent
// acknowledges it (job.ack or job.status running), how long the job waited
// from entering the queue (ready) until that acknowledgement, with the
// job's runsOn labels. It runs under the dispatcher's lock: it must only
// record (a histogram observation), never block.
type AckObserver func(runsOn []string, readyToAck time.Duration)

// observeAckLocked reports js's dispatch latency. Caller holds d.mu.
func (d *Dispatcher) observeAckLocked(js *jobState) {
	if d.ackObserver != nil && !js.entry.CreatedAt.IsZero() {
		d.ackObserver(js.entry.RunsOnLabels, time.Since(js.entry.CreatedAt))
	}
}

// AgentCount returns the number of registered agents (cheaper than
// len(Agents()), for metrics).
func (d *Dispatcher) AgentCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.agents)
}
