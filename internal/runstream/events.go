package runstream

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"kici.dev/kici/internal/runs/status"
)

// RunEvent is the data of a "run" event.
type RunEvent struct {
	RunID         string     `json:"runId"`
	Status        status.Run `json:"status"`
	FailureReason string     `json:"failureReason,omitempty"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	CompletedAt   *time.Time `json:"completedAt,omitempty"`
	DurationMs    *int64     `json:"durationMs,omitempty"`
}

// RunEvents serves GET …/runs/{runId}/events: on connect a snapshot (one
// "run" event, a "job" event per job, a "step" event per reported step),
// then an event each time the run, a job or a step changes (status,
// pending reason, agent, timings), and "end" once the run and every job
// are terminal. A reconnecting client gets a fresh snapshot, so it needs
// no event id. Job and step data have the store's JSON shape (jobId,
// jobName, status, routingReason, …; stepIndex, stepName, status, …).
// 404 for an unknown run. The caller has checked permission and scope.
func (s *Streamer) RunEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	ev, ok := start(w)
	if !ok {
		return
	}
	seen := map[string]string{} // entity key -> last JSON sent
	wrote := false
	send := func(key, name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if seen[key] == string(b) {
			return nil
		}
		seen[key] = string(b)
		wrote = true
		return ev.event("", name, json.RawMessage(b))
	}
	stepsDone := map[string]bool{} // terminal jobs whose final steps were sent
	deadline := time.Now().Add(s.maxAge())
	for {
		var err error
		if run, err = s.Store.GetRun(ctx, run.ID); err != nil {
			return
		}
		jobs, err := s.Store.ListJobs(ctx, run.ID)
		if err != nil {
			return
		}
		allDone := run.Status.IsTerminal()
		if send("run", "run", RunEvent{RunID: run.ID, Status: run.Status, FailureReason: run.FailureReason,
			StartedAt: run.StartedAt, CompletedAt: run.CompletedAt, DurationMs: run.DurationMs}) != nil {
			return
		}
		for _, j := range jobs {
			if send("job:"+j.ID, "job", j) != nil {
				return
			}
			terminal := j.Status.IsTerminal()
			allDone = allDone && terminal
			if stepsDone[j.ID] || (j.StartedAt == nil && !terminal) {
				continue
			}
			steps, err := s.Store.ListSteps(ctx, j.ID)
			if err != nil {
				return
			}
			for _, st := range steps {
				if send("step:"+j.ID+":"+strconv.Itoa(st.StepIndex), "step", st) != nil {
					return
				}
			}
			stepsDone[j.ID] = terminal
		}
		if wrote {
			ev.flush()
			wrote = false
		}
		if allDone {
			_ = ev.event("", "end", RunEvent{RunID: run.ID, Status: run.Status})
			ev.flush()
			return
		}
		if !ev.wait(ctx, deadline, 2*s.poll(), nil) {
			return
		}
	}
}
