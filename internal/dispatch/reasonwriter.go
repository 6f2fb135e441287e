package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"kici.dev/kici/internal/store"
)

// reasonWriter writes pending reasons behind routing. Routing decides a
// job's reason (and clears it when the job is dispatched) under routeMu;
// writing each there cost a store round trip per parked job on the
// routing path: a burst of 2,000 jobs for labels no agent has made
// 2,000 statements, each one holding up the next routing decision. The
// writer keeps the latest reason per job and one goroutine at a time
// writes everything due in one store.SetPendingReasons call, so a burst
// costs a few statements and routing never waits for them.
//
// Per job the last reason given is the one that lands: a later reason
// replaces one not yet written, and batches are written one after the
// other. A reason reaches the store a batch's write later than before
// (reasonGather plus a write); it is what the UI and API show, and
// what the unroutable and queue-timeout sweeps read, on cadences of
// seconds.
type reasonWriter struct {
	st  store.Store
	log *slog.Logger

	mu      sync.Mutex
	due     map[string]string // job id → reason not yet written
	writing bool              // a goroutine is writing batches
	settled *sync.Cond        // broadcast when writing ends
}

// reasonWriteTimeout bounds one batch's write: the writer does not use a
// caller's context, since the caller (a routing pass, a scaler backend)
// may be gone before its reason is written.
const reasonWriteTimeout = 30 * time.Second

func newReasonWriter(st store.Store, log *slog.Logger) *reasonWriter {
	w := &reasonWriter{st: st, log: log, due: map[string]string{}}
	w.settled = sync.NewCond(&w.mu)
	return w
}

// put schedules reason ("" clears it) as job jobID's pending reason.
func (w *reasonWriter) put(jobID, reason string) {
	w.mu.Lock()
	w.due[jobID] = reason
	start := !w.writing
	w.writing = true
	w.mu.Unlock()
	if start {
		go w.writeAll()
	}
}

// reasonGather is how long the writer lets reasons gather before each
// write: in a burst, jobs are routed a few hundred a second, and a write
// per job's reason would cost as many statements as there are jobs.
const reasonGather = 10 * time.Millisecond

// writeAll writes batches, each gathered for reasonGather, until nothing
// is due.
func (w *reasonWriter) writeAll() {
	for {
		time.Sleep(reasonGather)
		w.mu.Lock()
		batch := w.due
		if len(batch) == 0 {
			w.writing = false
			w.settled.Broadcast()
			w.mu.Unlock()
			return
		}
		w.due = map[string]string{}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), reasonWriteTimeout)
		if err := w.st.SetPendingReasons(ctx, batch); err != nil {
			w.log.Warn("write pending reasons", "jobs", len(batch), "err", err)
		}
		cancel()
	}
}

// wait returns once every reason put so far is written (or its write
// failed): Shutdown's flush, and what tests read the store after.
func (w *reasonWriter) wait() {
	w.mu.Lock()
	for w.writing {
		w.settled.Wait()
	}
	w.mu.Unlock()
}
