package dispatch

// The frames registered agents send back, reported to the run tracker and
// the log store.

import (
	"context"
	"sync"
	"time"

	"kici.dev/kici/internal/runs/status"
)

// frameHandler owns what registered agents send (messages.go, logs.go,
// outputs.go, provenance.go): acks, step and job statuses, log lines,
// outputs and provenance requests, reported to the JobEvents and the
// LogSink. The jobs it applies them to are the registry's; requeues and
// re-drives are the queue's.
type frameHandler struct {
	*core
	// logs stores log lines; nil stores none.
	logs LogSink
	// attester signs provenance (provenance.go); nil = refused.
	attester Attester

	reg *registry
	q   *jobQueue

	mu sync.Mutex
	// events receives the job lifecycle; guarded by mu.
	events JobEvents
}

func (fr *frameHandler) ev() JobEvents {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.events
}

// finishJob reports a terminal job status to the events receiver. It
// returns true when the receiver took it, which means the job is terminal
// in the store (runs.JobReports.JobFinished), and false when there is no
// receiver or it returned an error.
func (fr *frameHandler) finishJob(ctx context.Context, jobID string, final status.Job, msg string) bool {
	ev := fr.ev()
	if ev == nil {
		return false
	}
	if err := ev.JobFinished(ctx, jobID, final, msg, time.Now().UTC()); err != nil {
		fr.log.Error("job finished event", "job", jobID, "err", err)
		return false
	}
	return true
}
