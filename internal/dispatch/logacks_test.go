package dispatch

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
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

// runningWithLogAcks starts a dispatcher storing logs in sink, registers
// an agent that negotiates LogAcks, and returns it with a job it runs.
func runningWithLogAcks(t *testing.T, sink LogSink) (*client, *protocol.JobDispatch) {
	t.Helper()
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
	return a, jd
}

// An agent that negotiated LogAcks numbers its lines: the dispatcher stores
// them by offset and acknowledges what the store holds, so contiguous
// chunks are stored once and acknowledged up to their end, and a replay of
// stored lines (an agent that missed the ack) is stored nothing and
// acknowledged at the store's offset, not at the end of the replayed chunk.
func TestLogChunksWithOffsetsAreStoredOnceAndAcknowledged(t *testing.T) {
	sink := &offsetSink{FS: logstore.NewFS(t.TempDir())}
	a, jd := runningWithLogAcks(t, sink)

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

// gatedSink is offsetSink whose first AppendFrom waits for release.
type gatedSink struct {
	offsetSink
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *gatedSink) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (logstore.AppendResult, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.release
	}
	return s.offsetSink.AppendFrom(runID, jobID, stepIndex, offset, lines)
}

// While a write is slow, the message loop reads on: the chunks sent
// meanwhile are stored once each, in order, each write starting where the
// previous ended, and acknowledged to their end.
func TestLogChunksDuringASlowWriteStayInOrder(t *testing.T) {
	sink := &gatedSink{offsetSink: offsetSink{FS: logstore.NewFS(t.TempDir())}, entered: make(chan struct{}), release: make(chan struct{})}
	a, jd := runningWithLogAcks(t, sink)

	const chunks = 200
	var want []string
	for i := range chunks {
		offset := int64(i)
		text := fmt.Sprintf("line %d", i)
		want = append(want, text)
		a.send(&protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0,
			Seq: offset, Offset: &offset, Lines: []protocol.LogLine{{Text: text}}})
		if i == 0 {
			<-sink.entered // the first write is in flight, and held
		}
	}
	close(sink.release)
	for {
		if ack := a.nextLogAck(); ack.Offset == chunks {
			break
		} else if ack.Offset > chunks {
			t.Fatalf("acknowledged to %d, want at most %d", ack.Offset, chunks)
		}
	}
	lines, _, err := sink.Read(jd.RunID, jd.JobID, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Text)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stored %d lines %v…, want the %d sent in order", len(got), got[:min(5, len(got))], chunks)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var next int64
	for _, c := range sink.calls {
		if c[0] != next {
			t.Fatalf("append calls %v: each must start where the previous ended", sink.calls)
		}
		next = c[0] + c[1]
	}
}

// A chunk that does not continue the lines read so far in a batch (a
// resend that overlaps them and carries new lines too) is written after
// them, in a batch of its own: its new lines are stored, none is skipped,
// and the chunks after it follow. The chunks go straight to the message
// loop's handler, as frames read back to back do.
func TestAChunkThatDoesNotContinueItsStepIsStoredToo(t *testing.T) {
	fr, c, sink := directLogLoop(t, nil)
	chunk := func(offset int64, texts ...string) { directChunk(fr, c, offset, texts...) }
	chunk(0, "a")
	chunk(1, "b")
	chunk(0, "a", "b", "c") // starts before the batch's lines: not a continuation
	chunk(3, "d")
	if !fr.flushLogs(c) {
		t.Fatal("flush failed")
	}
	if got := storedTexts(t, sink); got != "a,b,c,d" {
		t.Fatalf("stored %v, want a,b,c,d (appends %v)", got, sink.calls)
	}
}

// After a log write failed, the connection stores no later line, whether
// read into the batch behind the failed one or after: a later line stored
// would leave a gap, which the store counts as skipped and refuses to
// fill when the agent sends the lines again.
func TestNoLineIsStoredAfterAFailedLogWrite(t *testing.T) {
	fr, c, sink := directLogLoop(t, errors.New("database gone"))
	directChunk(fr, c, 0, "a")
	if !fr.startLogWrite(c) { // the first write fails in the background
		t.Fatal("handing over the first write failed")
	}
	directChunk(fr, c, 1, "b")
	if fr.startLogWrite(c) {
		t.Fatal("the failed write was not reported")
	}
	directChunk(fr, c, 2, "c")
	if fr.flushLogs(c) || fr.startLogWrite(c) {
		t.Fatal("writes went on after one failed")
	}
	if got := storedTexts(t, sink); got != "" {
		t.Fatalf("stored %q after the failed write; want nothing (appends %v)", got, sink.calls)
	}
}

// failingSink fails every AppendFrom with err.
type failingSink struct {
	*offsetSink
	err error
}

// AppendFrom implements LogSink: it records the call and fails.
func (s *failingSink) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (logstore.AppendResult, error) {
	if s.err != nil {
		s.mu.Lock()
		s.calls = append(s.calls, [2]int64{offset, int64(len(lines))})
		s.mu.Unlock()
		return logstore.AppendResult{}, s.err
	}
	return s.offsetSink.AppendFrom(runID, jobID, stepIndex, offset, lines)
}

// directLogLoop is a message loop's log handling on its own: a frame
// handler storing in a real logstore.FS (failing every append with
// failWith, when set) and a connection whose acknowledgements go to a
// socket that drops them. Chunks given to it are handled back to back, as
// frames read without a pause are.
func directLogLoop(t *testing.T, failWith error) (*frameHandler, *agentConn, *offsetSink) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		for { // the agent's side: read the acks, and drop them
			if _, _, err := ws.Read(r.Context()); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	ws, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	sink := &offsetSink{FS: logstore.NewFS(t.TempDir())}
	fr := &frameHandler{core: &core{log: slog.New(slog.DiscardHandler), ctx: t.Context()}, logs: &failingSink{offsetSink: sink, err: failWith}}
	return fr, &agentConn{ws: ws, closeDone: make(chan struct{})}, sink
}

// directChunk hands fr one log.chunk of step 0 of job-1 at offset.
func directChunk(fr *frameHandler, c *agentConn, offset int64, texts ...string) {
	lines := make([]protocol.LogLine, len(texts))
	for i, s := range texts {
		lines[i] = protocol.LogLine{Text: s}
	}
	fr.logChunk(c, nil, "job-1", &protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: "run-1", JobID: "job-1",
		Seq: offset, Offset: &offset, Lines: lines})
}

// storedTexts is what sink holds for step 0 of job-1, joined by commas.
func storedTexts(t *testing.T, sink *offsetSink) string {
	t.Helper()
	lines, _, err := sink.Read("run-1", "job-1", 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Text)
	}
	return strings.Join(got, ",")
}

// What a batch reserves for its steps' lines is bounded by maxBatchLines
// however many steps an agent sends one line for after a large batch.
func TestABatchReservesAtMostMaxBatchLines(t *testing.T) {
	fr, c, _ := directLogLoop(t, nil)
	c.logHint = maxBatchLines // as after a batch of one step printing fast
	for step := range 200 {
		off := int64(0)
		fr.logChunk(c, nil, "job-1", &protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: "run-1", JobID: "job-1",
			StepIndex: step, Offset: &off, Lines: []protocol.LogLine{{Text: "x"}}})
	}
	reserved := 0
	for _, p := range c.logs.steps {
		reserved += cap(p.lines)
	}
	if len(c.logs.steps) != 200 || reserved > maxBatchLines+200 {
		t.Fatalf("%d steps reserve %d lines, want at most %d", len(c.logs.steps), reserved, maxBatchLines+200)
	}
}
