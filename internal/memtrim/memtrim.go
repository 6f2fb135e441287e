// Package memtrim hands memory the Go runtime keeps after a load spike back
// to the operating system.
//
// The runtime returns freed heap pages slowly: it keeps about as much free
// heap as the last GC cycle's goal allows, and its background scavenger
// releases the rest over minutes. After a wave of agents disconnects (a
// thousand WebSocket sessions with their buffers and goroutines) an idle
// orchestrator's resident set therefore stays well above its idle figure
// for a long time, which an operator reads as a leak. A Trimmer looks at
// the runtime's own counters every Interval and forces one collection and
// release (debug.FreeOSMemory) when either
//
//   - the number of goroutines fell by at least DropFraction (and by at
//     least MinDrop goroutines) since the last look: connections went away
//     and their memory becomes garbage that no collection has reached yet; or
//   - free, unreleased heap exceeds both MinFree and the live heap: a
//     collection already ran but the pages were kept.
//
// A forced collection of a small heap costs milliseconds of CPU; the
// rules keep it to after a spike, never on a steady server.
package memtrim

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Stats are the runtime counters a Trimmer decides on.
type Stats struct {
	// Goroutines is the number of live goroutines.
	Goroutines uint64
	// HeapFree is heap memory that is free and not yet returned to the
	// operating system, in bytes (/memory/classes/heap/free:bytes).
	HeapFree uint64
	// HeapObjects is heap memory occupied by objects, live or not yet
	// collected, in bytes (/memory/classes/heap/objects:bytes).
	HeapObjects uint64
}

// Trimmer decides when to return free heap to the operating system. The
// zero value is usable: zero fields take the defaults documented on each.
type Trimmer struct {
	// Interval is the time between looks; default 10 s.
	Interval time.Duration
	// DropFraction is the fall in goroutines, relative to the previous
	// look, that counts as a wave of departures; default 0.25.
	DropFraction float64
	// MinDrop is the smallest fall in goroutines that counts; default 64.
	MinDrop uint64
	// MinFree is free heap, in bytes, that is always tolerated; default
	// 16 MiB.
	MinFree uint64
	// Log, when set, receives one debug line per trim.
	Log *slog.Logger
	// AfterTrim, when set, runs after each trim, under the same rules, on
	// the goroutine of Check, once the trim is done and logged. The
	// orchestrator releases its binary's pages there (package startpages):
	// the code a wave of agents ran is then no longer counted in its
	// resident size once they are gone, as their heap is not.
	AfterTrim func()

	// read and free are the runtime by default; tests replace them.
	read func() Stats
	free func()

	last Stats
	seen bool
}

// Run looks every Interval until ctx ends.
func (t *Trimmer) Run(ctx context.Context) {
	tick := time.NewTicker(t.interval())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.Check()
		}
	}
}

// Check takes one look and trims when a rule above holds. It reports
// whether it trimmed. Not safe for concurrent use.
func (t *Trimmer) Check() bool {
	read, free := t.read, t.free
	if read == nil {
		read = ReadStats
	}
	if free == nil {
		free = debug.FreeOSMemory
	}
	now := read()
	prev, seen := t.last, t.seen
	t.last, t.seen = now, true
	if !t.due(prev, seen, now) {
		return false
	}
	start := time.Now()
	free()
	after := read()
	// The look after a trim compares against what is left, so one wave
	// trims once.
	t.last = after
	if t.Log != nil {
		t.Log.Debug("memory returned to the operating system",
			"goroutines", now.Goroutines, "heapFreeBefore", now.HeapFree, "heapFreeAfter", after.HeapFree,
			"heapObjectsAfter", after.HeapObjects, "took", time.Since(start))
	}
	if t.AfterTrim != nil {
		t.AfterTrim()
	}
	return true
}

// due applies the two rules of the package comment.
func (t *Trimmer) due(prev Stats, seen bool, now Stats) bool {
	if seen && prev.Goroutines > now.Goroutines {
		drop := prev.Goroutines - now.Goroutines
		if drop >= t.minDrop() && float64(drop) >= t.dropFraction()*float64(prev.Goroutines) {
			return true
		}
	}
	return now.HeapFree > t.minFree() && now.HeapFree > now.HeapObjects
}

func (t *Trimmer) interval() time.Duration {
	if t.Interval > 0 {
		return t.Interval
	}
	return 10 * time.Second
}

func (t *Trimmer) dropFraction() float64 {
	if t.DropFraction > 0 {
		return t.DropFraction
	}
	return 0.25
}

func (t *Trimmer) minDrop() uint64 {
	if t.MinDrop > 0 {
		return t.MinDrop
	}
	return 64
}

func (t *Trimmer) minFree() uint64 {
	if t.MinFree > 0 {
		return t.MinFree
	}
	return 16 << 20
}

// statNames are the runtime/metrics samples ReadStats reads, in Stats order.
var statNames = []string{
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
}

// ReadStats reads Stats from runtime/metrics.
func ReadStats() Stats {
	samples := make([]metrics.Sample, len(statNames))
	for i, n := range statNames {
		samples[i].Name = n
	}
	metrics.Read(samples)
	v := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	return Stats{Goroutines: v(0), HeapFree: v(1), HeapObjects: v(2)}
}
