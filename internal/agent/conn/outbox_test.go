package conn

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

func chunk(step int, off int64, texts ...string) *protocol.LogChunk {
	lc := &protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: "r", JobID: "j", StepIndex: step, Offset: &off}
	for _, t := range texts {
		lc.Lines = append(lc.Lines, protocol.LogLine{Text: t})
	}
	return lc
}

// drain writes every queued frame (as a session would) and returns them in
// order as short strings.
func drain(t *testing.T, o *outbox) []string {
	t.Helper()
	var got []string
	for {
		it, _, err := o.next()
		if err != nil {
			t.Fatal(err)
		}
		if it == nil {
			return got
		}
		switch m := it.msg.(type) {
		case *protocol.JobStatus:
			got = append(got, "job:"+string(m.State))
		case *protocol.LogChunk:
			got = append(got, fmt.Sprintf("log:%d@%d:%s", m.StepIndex, *m.Offset, strings.Join(texts(m), ",")))
		}
		o.done(it, true)
	}
}

func texts(m *protocol.LogChunk) []string {
	var out []string
	for _, l := range m.Lines {
		out = append(out, l.Text)
	}
	return out
}

// Chunks that continue each other are merged while queued; frames keep
// their order; nothing is dropped however many chunks wait.
func TestOutboxKeepsEveryChunkInOrder(t *testing.T) {
	o := newOutbox(1<<30, 0, t.TempDir(), nil)
	o.push(&protocol.JobStatus{Type: protocol.TypeJobStatus, JobID: "j", State: "running"})
	for i := 0; i < 20000; i++ {
		o.push(chunk(0, int64(i), fmt.Sprint(i)))
	}
	o.push(&protocol.JobStatus{Type: protocol.TypeJobStatus, JobID: "j", State: "success"})
	got := drain(t, o)
	if got[0] != "job:running" || got[len(got)-1] != "job:success" {
		t.Fatalf("order of statuses: %v … %v", got[0], got[len(got)-1])
	}
	var lines []string
	for _, g := range got[1 : len(got)-1] {
		lines = append(lines, strings.Split(g[strings.LastIndexByte(g, ':')+1:], ",")...)
	}
	if len(lines) != 20000 {
		t.Fatalf("%d lines delivered, want 20000", len(lines))
	}
	for i, l := range lines {
		if l != fmt.Sprint(i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
	if len(got) > 20 {
		t.Fatalf("%d frames: queued chunks were not merged", len(got))
	}
}

// While connected, a full outbox makes the next log chunk wait until an
// acknowledgement frees room: the step is slowed down, nothing dropped.
func TestOutboxBlocksWhenFullAndConnected(t *testing.T) {
	one := chunkSize(chunk(0, 0, "x"))
	o := newOutbox(2*one, 0, t.TempDir(), nil)
	o.registered(true)
	o.push(chunk(0, 0, "a"))
	it, _, _ := o.next()
	o.done(it, true) // written, unacknowledged: still holds room
	o.push(chunk(1, 0, "b"))
	var pushed atomic.Bool
	go func() {
		o.push(chunk(2, 0, "c"))
		pushed.Store(true)
	}()
	wait.Elapse(t.Context(), 100*time.Millisecond) // room for a push that wrongly does not block
	if pushed.Load() {
		t.Fatal("push into a full outbox did not wait")
	}
	o.ack(&protocol.LogAck{JobID: "j", StepIndex: 0, Offset: 1})
	if !wait.Until(5*time.Second, pushed.Load) {
		t.Fatal("ack did not release the waiting push")
	}
	if got := drain(t, o); strings.Join(got, "|") != "log:1@0:b|log:2@0:c" {
		t.Fatalf("got %v", got)
	}
}

// While disconnected, chunks beyond the memory bound go to the spill file;
// on the next session the unacknowledged chunks go out first, then the
// queue and the spill, in push order, statuses included.
func TestOutboxSpillsWhileDisconnectedAndReplaysInOrder(t *testing.T) {
	one := chunkSize(chunk(0, 0, "0000"))
	o := newOutbox(3*one, 0, t.TempDir(), nil)
	o.registered(true)
	o.push(chunk(0, 0, "0000"))
	it, _, _ := o.next()
	o.done(it, true) // written, then the connection drops before the ack
	o.disconnected()
	want := []string{"log:0@0:0000"}
	for i := 1; i < 400; i++ {
		step := i % 3 // different steps: nothing merges
		o.push(chunk(step, int64(i), fmt.Sprintf("%04d", i)))
		want = append(want, fmt.Sprintf("log:%d@%d:%04d", step, i, i))
		if i == 200 {
			o.push(&protocol.JobStatus{Type: protocol.TypeJobStatus, JobID: "j", State: "mid"})
			want = append(want, "job:mid")
		}
	}
	if o.spill == nil || o.spill.count == 0 {
		t.Fatal("nothing was spilled")
	}
	if n := o.len(); n != 401 {
		t.Fatalf("pending = %d, want 401", n)
	}
	o.registered(true)
	got := drain(t, o)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("replay order:\n got %v\nwant %v", got, want)
	}
	if o.spill.count != 0 || o.spill.wOff != 0 {
		t.Fatal("spill not reset after it was read back")
	}
}

func BenchmarkOutboxPush(b *testing.B) {
	o := newOutbox(0, 0, b.TempDir(), nil)
	lines := make([]string, 50)
	for i := range lines {
		lines[i] = "some log line of ordinary length, 50 lines a chunk"
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		o.push(chunk(0, int64(i*50), lines...))
		it, _, _ := o.next()
		o.done(it, true)
	}
}

// An acknowledgement can overtake the return of the write that carried its
// chunk; the chunk must not then wait for an ack that already came.
func TestOutboxAckBeforeWriteReturns(t *testing.T) {
	o := newOutbox(0, 0, t.TempDir(), nil)
	o.registered(true)
	o.push(chunk(0, 0, "a", "b"))
	it, _, _ := o.next()
	o.ack(&protocol.LogAck{JobID: "j", StepIndex: 0, Offset: 2})
	o.done(it, true)
	if n := o.len(); n != 0 {
		t.Fatalf("%d frames still held after their ack", n)
	}
}
