package orchestrator

import (
	"strings"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/scaler"
)

// scalerStatus is the scaler's status with each agent's job as the
// dispatcher sees it: a warm pool agent is spawned without a job and is
// handed one later through ordinary dispatch, which the scaler does not
// track, so its JOB would otherwise stay empty while it runs one.
func scalerStatus(sc *scaler.Manager, agents []dispatch.AgentInfo) scaler.Status {
	st := sc.Status()
	jobs := make(map[string]string, len(agents))
	for _, a := range agents {
		if len(a.JobIDs) > 0 {
			jobs[a.ID] = strings.Join(a.JobIDs, ",")
		}
	}
	for i := range st.Scalers {
		for j := range st.Scalers[i].Agents {
			ag := &st.Scalers[i].Agents[j]
			if ag.JobID == "" {
				ag.JobID = jobs[ag.AgentID]
			}
		}
	}
	return st
}
