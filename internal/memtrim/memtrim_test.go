package memtrim

import (
	"runtime"
	"testing"
)

// fake is a scripted runtime: each read returns the next Stats, and a trim
// is counted.
type fake struct {
	stats []Stats
	trims int
	// afterTrims counts the Trimmer's AfterTrim calls.
	afterTrims int
}

func (f *fake) trimmer() *Trimmer {
	return &Trimmer{
		read: func() Stats {
			s := f.stats[0]
			if len(f.stats) > 1 {
				f.stats = f.stats[1:]
			}
			return s
		},
		free:      func() { f.trims++ },
		AfterTrim: func() { f.afterTrims++ },
	}
}

func TestWaveOfDeparturesTrimsOnce(t *testing.T) {
	f := &fake{}
	tr := f.trimmer()
	// 1,000 agents connected (two goroutines each), then they leave.
	f.stats = []Stats{{Goroutines: 2050, HeapObjects: 60 << 20}}
	if tr.Check() {
		t.Fatal("first look trimmed: nothing to compare with yet")
	}
	f.stats = []Stats{{Goroutines: 50, HeapObjects: 60 << 20, HeapFree: 2 << 20}, {Goroutines: 50, HeapObjects: 8 << 20, HeapFree: 1 << 20}}
	if !tr.Check() || f.trims != 1 {
		t.Fatalf("goroutines 2050 → 50: trims = %d, want 1", f.trims)
	}
	// The next look compares with what was left after the trim.
	f.stats = []Stats{{Goroutines: 50, HeapObjects: 8 << 20, HeapFree: 1 << 20}}
	if tr.Check() || f.trims != 1 {
		t.Fatalf("steady after the trim: trims = %d, want still 1", f.trims)
	}
	if f.afterTrims != 1 {
		t.Fatalf("AfterTrim ran %d times for one trim, want 1", f.afterTrims)
	}
}

func TestSteadyOrSmallChangesDoNotTrim(t *testing.T) {
	f := &fake{}
	tr := f.trimmer()
	for _, s := range []Stats{
		{Goroutines: 40, HeapObjects: 10 << 20, HeapFree: 4 << 20},
		{Goroutines: 30, HeapObjects: 10 << 20, HeapFree: 4 << 20},    // a 25% fall, but only 10 goroutines
		{Goroutines: 2000, HeapObjects: 50 << 20, HeapFree: 8 << 20},  // a rise
		{Goroutines: 1800, HeapObjects: 50 << 20, HeapFree: 8 << 20},  // 200 fewer, 10%
		{Goroutines: 1800, HeapObjects: 10 << 20, HeapFree: 12 << 20}, // free above objects, under 16 MiB
		{Goroutines: 1800, HeapObjects: 40 << 20, HeapFree: 30 << 20}, // free above 16 MiB, under objects
	} {
		f.stats = []Stats{s}
		if tr.Check() {
			t.Fatalf("trimmed at %+v", s)
		}
	}
	if f.trims != 0 || f.afterTrims != 0 {
		t.Fatalf("trims = %d and AfterTrim ran %d times, want 0 and 0", f.trims, f.afterTrims)
	}
}

func TestKeptFreeHeapAboveLiveHeapTrims(t *testing.T) {
	f := &fake{stats: []Stats{{Goroutines: 40, HeapObjects: 10 << 20, HeapFree: 40 << 20}, {Goroutines: 40, HeapObjects: 10 << 20}}}
	if !f.trimmer().Check() || f.trims != 1 {
		t.Fatalf("40 MiB free over 10 MiB live: trims = %d, want 1", f.trims)
	}
}

// TestRealRuntimeReturnsFreedHeap runs the rule on the real runtime: 64 MiB
// of garbage collected but kept by the runtime is returned by one Check.
func TestRealRuntimeReturnsFreedHeap(t *testing.T) {
	keep := make([][]byte, 0, 64<<10)
	for i := 0; i < 64<<10; i++ {
		keep = append(keep, make([]byte, 1024))
	}
	runtime.KeepAlive(keep) // keep is garbage from here on
	runtime.GC()
	before := ReadStats()
	if before.HeapFree < 32<<20 {
		t.Fatalf("after freeing 64 MiB the runtime keeps only %d bytes free; the test cannot show a trim", before.HeapFree)
	}
	tr := &Trimmer{}
	tr.last, tr.seen = before, true
	if !tr.Check() {
		t.Fatalf("free heap %d bytes over %d of objects: no trim", before.HeapFree, before.HeapObjects)
	}
	after := ReadStats()
	if after.HeapFree > 4<<20 {
		t.Fatalf("free heap after the trim = %d bytes, want under 4 MiB (was %d)", after.HeapFree, before.HeapFree)
	}
}
