package dispatch

// stopSpawnFor stops the agents spawned for jobID that have not registered
// yet (a container still starting, a process not yet connected): once the
// job is cancelled or expired nothing will ever be dispatched to them, and
// each holds a slot of its scaler's pool until its spawn deadline. The
// scaler frees the slot when the agent has ended.
func (d *Dispatcher) stopSpawnFor(jobID string) {
	d.mu.Lock()
	var ids []string
	for id, rec := range d.spawns {
		if rec.jobID == jobID && d.agents[id] == nil {
			ids = append(ids, id)
			delete(d.spawns, id)
		}
	}
	d.mu.Unlock()
	for _, id := range ids {
		d.log.Info("stopping the agent spawned for a job that ended before it registered", "agent", id, "job", jobID)
		if d.spawner != nil {
			d.spawner.Stop(id)
		}
	}
}
