package dispatch

// stopSpawnFor stops the agents spawned for jobID that have not registered
// yet (a container still starting, a process not yet connected): once the
// job is cancelled or expired nothing will ever be dispatched to them, and
// each holds a slot of its scaler's pool until its spawn deadline. The
// scaler frees the slot when the agent has ended.
func (q *jobQueue) stopSpawnFor(jobID string) {
	q.mu.Lock()
	var ids []string
	for id, rec := range q.spawns {
		if rec.jobID == jobID && !q.reg.hasAgent(id) { // lock order: q.mu → registry.mu
			ids = append(ids, id)
			delete(q.spawns, id)
		}
	}
	q.mu.Unlock()
	for _, id := range ids {
		q.log.Info("stopping the agent spawned for a job that ended before it registered", "agent", id, "job", jobID)
		if q.spawner != nil {
			q.spawner.Stop(id)
		}
	}
}
