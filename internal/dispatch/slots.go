package dispatch

// Agent slots: the registry reserves and gives back the slots routing
// hands jobs into, and says why no agent took a job.

import (
	"fmt"
	"sort"
	"strings"

	"kici.dev/kici/internal/store"
)

// canTakeLocked reports whether agent a has a free slot for new work.
// Caller holds registry.mu.
func (a *agentConn) canTakeLocked() bool {
	if !a.ready || a.closing || a.active >= a.maxConc {
		return false
	}
	// A scaler-managed agent is single-use: it runs one job, then exits.
	return !a.scalerManaged || a.served == 0
}

// reserveIdle picks the idle agent with the lowest id that may take e
// (skipping exclude) and reserves one of its slots.
func (r *registry) reserveIdle(e *store.QueueEntry, exclude string) *agentConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *agentConn
	for id, a := range r.agents {
		if id == exclude || !a.canTakeLocked() {
			continue
		}
		if e.PinnedAgentID != "" && e.PinnedAgentID != id {
			continue
		}
		if !agentFitsLocked(a, e) {
			continue
		}
		if best == nil || id < best.id {
			best = a
		}
	}
	if best != nil {
		best.active++
		best.served++
	}
	return best
}

// reserve takes a slot on a registered agent for a drain.
func (r *registry) reserve(a *agentConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.agents[a.id] != a || !a.canTakeLocked() {
		return false
	}
	a.active++
	a.served++
	return true
}

// release gives back a slot reserved by reserve or reserveIdle that was not
// used.
func (r *registry) release(a *agentConn) {
	r.mu.Lock()
	a.active--
	a.served--
	r.mu.Unlock()
}

// noAgentReason says why no connected agent took e; when agents have its
// labels but none has a token minted for the host it pins, it says so.
func (r *registry) noAgentReason(e *store.QueueEntry) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.agents) == 0 {
		return reasonNoAgent
	}
	unvouched := ""
	for _, a := range r.agents {
		if agentFitsLocked(a, e) {
			return reasonAllBusy
		}
		// Would fit if its token were minted for the hosts e pins: an
		// agent claiming the host on a token that does not vouch for it.
		if agentFits(a.labels, a.mandatory, e.RunsOnLabels, e.RunsOnLabels, e.ExcludeLabels) {
			unvouched = UnvouchedHost(e.RunsOnLabels, a.tokenLabels)
		}
	}
	if unvouched != "" {
		return hostTokenReason(unvouched)
	}
	labels := append([]string{}, e.RunsOnLabels...)
	sort.Strings(labels)
	return fmt.Sprintf("no agent with labels [%s]", strings.Join(labels, " "))
}
