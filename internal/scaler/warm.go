package scaler

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// newAgentID mints scaler-<type>-<8 hex> (KiCI).
func newAgentID(e *Entry) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "scaler-" + string(e.Type) + "-" + hex.EncodeToString(b[:])
}

// AgentRegistered runs a warm-pool pass when agentID, now registered, is a
// warm-pool agent (dispatch.Spawner): the pool and its
// kici_orch_scaler_warm_pool_ready gauge count it ready at once, not at
// the next periodic check.
func (m *Manager) AgentRegistered(agentID string) {
	m.mu.Lock()
	a := m.agents[agentID]
	warm := a != nil && a.warm
	m.mu.Unlock()
	if warm {
		m.kickWarm()
	}
}

// warmRefillDelay is how long AgentTookJob waits before refilling: the
// new agent's start costs about as much CPU as the job's own checkout, and
// on a small host starting both at once slows the job that just began.
const warmRefillDelay = 250 * time.Millisecond

// AgentTookJob tells the warm pools that an agent acknowledged a job: a
// warm agent that did has left its pool, which is refilled shortly after
// (warmRefillDelay) rather than when the job ends, so back-to-back jobs
// find an agent waiting. Calls while a refill is pending coalesce; it never
// blocks.
func (m *Manager) AgentTookJob() {
	if m.refillPending.CompareAndSwap(false, true) {
		time.AfterFunc(warmRefillDelay, func() {
			m.refillPending.Store(false)
			m.kickWarm()
		})
	}
}

func (m *Manager) kickWarm() {
	select {
	case m.warmKick <- struct{}{}:
	default:
	}
}

// warmLoop runs a warm-pool pass at once, then every WarmPoolInterval and
// after every exit or reload, until Shutdown.
func (m *Manager) warmLoop() {
	t := time.NewTicker(m.opts.WarmPoolInterval)
	defer t.Stop()
	for {
		m.warmPass()
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			m.reapExited()
		case <-m.warmKick:
		}
	}
}

// warmPass tops up and reaps the warm pools (KiCI WarmPoolManager):
//   - a warm agent registered and busy has taken a job: it leaves the pool;
//   - ready = warm agents registered and idle; in flight = warm agents not
//     registered yet;
//   - deficit = size − ready − inFlight per label set, clamped to the
//     scaler's and the global headroom (shared within a pass);
//   - surplus ready agents (above size, or every one when the pool is
//     disabled or the scaler retiring) idle longer than idleTimeoutSeconds
//     are destroyed, oldest first; a retiring scaler's are destroyed at once.
func (m *Manager) warmPass() {
	idleFn := m.idleAgents()
	if idleFn == nil {
		return
	}
	idle := idleFn()
	if idle == nil {
		// Without the registry view readiness is unknown (and the
		// orchestrator is not serving yet): pools wait for Serve.
		return
	}
	now := time.Now()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	total := 0
	for _, sc := range m.scalers {
		total += sc.active
	}
	// Pools are keyed by scaler and canonical labels: a reload replaces
	// the LabelSet values, and agents of a label set that no longer exists
	// are surplus.
	type key struct {
		sc     *scalerState
		labels string
	}
	keyOf := func(sc *scalerState, ls *LabelSet) key {
		return key{sc, strings.Join(slices.Sorted(slices.Values(ls.Labels)), ",")}
	}
	ready := map[key][]*agentRec{}
	inFlight := map[key]int{}
	registeredBusy := []*agentRec{}
	for _, a := range m.agents {
		if !a.warm {
			continue
		}
		k := keyOf(a.sc, a.ls)
		isIdle, registered := idle[a.id]
		switch {
		case registered && isIdle:
			if a.idleSince.IsZero() {
				a.idleSince = now
			}
			ready[k] = append(ready[k], a)
		case registered:
			registeredBusy = append(registeredBusy, a)
		default:
			if a.state != AgentRunning || a.idleSince.IsZero() {
				inFlight[k]++
			}
			// A warm agent seen idle before and gone from the registry now
			// has ended or is reconnecting; its exit releases it.
		}
	}
	for _, a := range registeredBusy {
		a.warm = false // took a job: single use, no longer in the pool
	}
	var spawn []*agentRec
	var reap []*agentRec
	sizes := map[key]int{}
	sets := map[key]*LabelSet{}
	for _, sc := range m.scalers {
		for _, ls := range sc.entry.LabelSets {
			k := keyOf(sc, ls)
			sets[k] = ls
			if wp := sc.entry.WarmPool; wp != nil && wp.Enabled && !sc.retiring {
				sizes[k] = wp.Size
			} else {
				sizes[k] = 0
			}
		}
	}
	for k := range ready {
		if _, ok := sizes[k]; !ok {
			sizes[k] = 0 // label set gone: every agent is surplus
		}
	}
	for k, size := range sizes {
		sc := k.sc
		wp := sc.entry.WarmPool
		r := ready[k]
		if len(r) > size {
			sort.Slice(r, func(i, j int) bool { return r[i].idleSince.Before(r[j].idleSince) })
			idleTimeout := 300 * time.Second
			if wp != nil {
				idleTimeout = time.Duration(wp.IdleTimeoutSeconds) * time.Second
			}
			for _, a := range r[:len(r)-size] {
				if sc.retiring || now.Sub(a.idleSince) >= idleTimeout {
					a.warm = false
					reap = append(reap, a)
				}
			}
		}
		ls := sets[k]
		deficit := size - len(r) - inFlight[k]
		for ; ls != nil && deficit > 0 && sc.active < sc.entry.MaxAgents && total < m.cfg.GlobalMaxAgents; deficit-- {
			rec := &agentRec{id: newAgentID(sc.entry), sc: sc, ls: ls, warm: true, state: AgentQueued, createdAt: now}
			sc.active++
			total++
			m.agents[rec.id] = rec
			spawn = append(spawn, rec)
		}
	}
	m.updateGaugesLocked()
	type wstat struct{ target, ready, inFlight, spawned, reaped int }
	stats := map[*scalerState]*wstat{}
	for _, sc := range m.scalers {
		if sc.entry.WarmPool != nil {
			stats[sc] = &wstat{}
		}
	}
	for k, size := range sizes {
		if st := stats[k.sc]; st != nil {
			st.target += size
			st.ready += len(ready[k])
			st.inFlight += inFlight[k]
		}
	}
	for _, rec := range spawn {
		if st := stats[rec.sc]; st != nil {
			st.spawned++
			st.inFlight++
		}
	}
	for _, rec := range reap {
		if st := stats[rec.sc]; st != nil {
			st.reaped++
			st.ready--
		}
	}
	for sc, st := range stats {
		m.opts.Metrics.warm(sc.entry.Name, st.target, st.ready, st.inFlight, st.spawned, st.reaped)
	}
	m.spawnsWG.Add(len(spawn))
	m.mu.Unlock()
	for _, rec := range spawn {
		m.log.Info("warm pool spawn", "scaler", rec.sc.entry.Name, "agent", rec.id)
		go m.runSpawn(rec, rec.ls)
	}
	for _, rec := range reap {
		m.log.Info("warm pool reaps surplus idle agent", "scaler", rec.sc.entry.Name, "agent", rec.id,
			"idleFor", fmt.Sprint(now.Sub(rec.idleSince).Round(time.Second)))
		m.destroy(rec)
	}
}
