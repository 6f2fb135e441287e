package scaler

// State is a scaler's health in the admin view (ScalerStatus.State): one of
// the Scaler* constants, a kici vocabulary.
type State string

// Scaler states in Status (ScalerStatus.State).
const (
	// ScalerActive: the scaler spawns agents.
	ScalerActive State = "active"
	// ScalerDegraded: the backend cannot spawn now (a Firecracker host that
	// is not ready); its spawns fail with StateReason until a reload fixes it.
	ScalerDegraded State = "degraded"
	// ScalerRetiring: removed by a reload, waiting for its agents to end.
	ScalerRetiring State = "retiring"
)

// hostChecker is a backend that can be unable to spawn at all
// (Firecracker.HostError).
type hostChecker interface{ HostError() error }

// stateOf is sc's state and, when not active, why.
func stateOf(sc *scalerState) (state State, reason string) {
	if sc.retiring {
		return ScalerRetiring, "removed by a reload; waiting for its agents to end"
	}
	if hc, ok := sc.backend.(hostChecker); ok {
		if err := hc.HostError(); err != nil {
			return ScalerDegraded, err.Error()
		}
	}
	return ScalerActive, ""
}

// maxRefusedJobs bounds the set of jobs a scaler remembers refusing (a
// job that never gets an agent, e.g. cancelled while waiting, is
// otherwise never forgotten).
const maxRefusedJobs = 4096

// refuseLocked counts a cap refusal of jobID against sc: once per job,
// however many times the dispatcher asks again for it while the cap holds,
// so the counter and kici_orch_scaler_spawn_refusals_total count jobs that
// had to wait, not retries. Called with m.mu held.
func (m *Manager) refuseLocked(sc *scalerState, jobID string) {
	if jobID != "" {
		if sc.refusedJobs == nil || len(sc.refusedJobs) >= maxRefusedJobs {
			sc.refusedJobs = map[string]bool{}
		}
		if sc.refusedJobs[jobID] {
			return
		}
		sc.refusedJobs[jobID] = true
	}
	sc.refused++
	m.opts.Metrics.refusal(sc.entry)
}
