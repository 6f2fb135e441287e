package agent

import (
	"time"

	"kici.dev/kici/internal/protocol"
)

// Terminal job statuses are acknowledged (protocol.JobStatusAck, negotiated
// with AgentRegister.StatusAcks) like log lines: the agent keeps each in
// recent until the orchestrator says the job's status is stored, sends the
// unacknowledged ones again after every reconnect (replayRecent), and waits
// for the acknowledgements before it exits. A status written to a socket
// whose node died before storing it is therefore applied by the node the
// agent fails over to, instead of the job ending timed_out_stale.

// onStatusAck forgets an acknowledged terminal status: it is stored, so it
// is neither listed in inFlightJobs nor replayed any more.
func (a *Agent) onStatusAck(m *protocol.JobStatusAck) {
	a.mu.Lock()
	if r, ok := a.recent[m.JobID]; ok && r.msg.State == m.State {
		delete(a.recent, m.JobID)
		delete(a.unreported, m.JobID)
	}
	a.mu.Unlock()
	select {
	case a.statusAcked <- struct{}{}:
	default:
	}
}

// unackedStatuses counts terminal statuses the orchestrator has not
// acknowledged; 0 when the orchestrator did not negotiate StatusAcks
// (nothing to wait for: the statuses are replayed on reconnect instead).
func (a *Agent) unackedStatuses() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.statusAcks {
		return 0
	}
	return len(a.recent)
}

// awaitStatusAcks waits, at most timeout, until every terminal status is
// acknowledged; across a reconnect the statuses are sent again to whichever
// node the agent reaches. It reports whether all were acknowledged.
func (a *Agent) awaitStatusAcks(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		n := a.unackedStatuses()
		if n == 0 {
			return true
		}
		select {
		case <-a.statusAcked:
		case <-t.C:
			a.log.Warn("exiting with terminal job statuses not acknowledged by the orchestrator", "unacknowledged", n)
			return false
		}
	}
}
