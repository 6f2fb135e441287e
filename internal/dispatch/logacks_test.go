package dispatch

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/testutil/wait"
)

// offsetSink stores log lines in a real logstore.FS, so skipping lines
// already held and the acknowledged offset are the store's own, and records
// the offset and line count of every AppendFrom.
type offsetSink struct {
	*logstore.FS
	mu    sync.Mutex
	calls [][2]int64 // offset, lines
}

func (s *offsetSink) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (logstore.AppendResult, error) {
	s.mu.Lock()
	s.calls = append(s.calls, [2]int64{offset, int64(len(lines))})
	s.mu.Unlock()
	return s.FS.AppendFrom(runID, jobID, stepIndex, offset, lines)
}

// nextLogAck reads until a log.ack arrives and returns it.
func (c *client) nextLogAck() *protocol.LogAck {
	c.t.Helper()
	for {
		if ack, ok := c.read().(*protocol.LogAck); ok {
			return ack
		}
	}
}

// An agent that negotiated LogAcks numbers its lines: the dispatcher stores
// them by offset and acknowledges what the store holds, so contiguous
// chunks are stored once and acknowledged up to their end, and a replay of
// stored lines (an agent that missed the ack) is stored nothing and
// acknowledged at the store's offset, not at the end of the replayed chunk.
func TestLogChunksWithOffsetsAreStoredOnceAndAcknowledged(t *testing.T) {
	sink := &offsetSink{FS: logstore.NewFS(t.TempDir())}
	h := newHarness(t, Config{}, nil).restartedWithLogs(Config{}, Deps{}, sink)
	a := h.dial()
	a.auth(h.staticToken())
	a.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: uuid.NewString(), AgentID: "a1",
		Labels: []string{"linux"}, LogAcks: true})
	if ack, ok := a.read().(*protocol.RegisterAck); !ok || !ack.LogAcks {
		t.Fatalf("register.ack %+v, want logAcks", ack)
	}
	wait.For(t, 5*time.Second, "registration drain", func() bool { return h.d.queue.registering.Load() == 0 })
	j := h.job("linux")
	h.enqueue(j)
	jd := a.dispatch()
	a.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "job running", func() bool { return h.getJob(j.ID).Status == status.JobRunning })

	chunk := func(seq, offset int64, texts ...string) {
		lines := make([]protocol.LogLine, len(texts))
		for i, s := range texts {
			lines[i] = protocol.LogLine{Text: s}
		}
		a.send(&protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0,
			Seq: seq, Offset: &offset, Lines: lines})
	}
	// ackedTo reads acks until one reaches want; none may pass it.
	ackedTo := func(want int64) {
		t.Helper()
		for {
			ack := a.nextLogAck()
			if ack.RunID != jd.RunID || ack.JobID != jd.JobID || ack.StepIndex != 0 || ack.Offset > want {
				t.Fatalf("log.ack %+v, want offset %d of step 0", ack, want)
			}
			if ack.Offset == want {
				return
			}
		}
	}
	stored := func() string {
		t.Helper()
		lines, _, err := sink.Read(jd.RunID, jd.JobID, 0, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		texts := make([]string, len(lines))
		for i, l := range lines {
			texts[i] = l.Text
		}
		return strings.Join(texts, ",")
	}

	chunk(0, 0, "a", "b")
	chunk(1, 2, "c")
	ackedTo(3)
	// The agent replays its first chunk: nothing is stored again, and the
	// ack says 3, what the store holds (2 would make it replay line c).
	chunk(0, 0, "a", "b")
	if ack := a.nextLogAck(); ack.Offset != 3 {
		t.Fatalf("replay acknowledged at %d, want 3", ack.Offset)
	}
	chunk(2, 3, "d")
	ackedTo(4)
	if got := stored(); got != "a,b,c,d" {
		t.Fatalf("stored %q, want a,b,c,d", got)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if first := sink.calls[0]; first[0] != 0 {
		t.Fatalf("first append at offset %d, want 0 (calls %v)", first[0], sink.calls)
	}
	for _, c := range sink.calls {
		if c[0] < 0 || c[0] > 3 || c[1] == 0 {
			t.Fatalf("append calls %v: each at an offset the agent sent, with its lines", sink.calls)
		}
	}
}
