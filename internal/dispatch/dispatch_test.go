package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

// events records lifecycle calls and applies them to the store the way the
// execution tracker does (status moves only), so "terminal in the DB" holds.
type events struct {
	st       store.Store
	mu       sync.Mutex
	started  map[string]int
	finished map[string][]status.Job // job → statuses reported
	errs     map[string]string
	steps    []*store.Step
}

func newEvents(st store.Store) *events {
	return &events{st: st, started: map[string]int{}, finished: map[string][]status.Job{}, errs: map[string]string{}}
}

func (e *events) JobStarted(ctx context.Context, jobID, agentID string, at time.Time) error {
	e.mu.Lock()
	e.started[jobID]++
	e.mu.Unlock()
	_, err := e.st.UpdateJobStatus(ctx, jobID, []status.Job{status.JobPending, status.JobQueued}, status.JobRunning,
		store.JobUpdate{AgentID: &agentID, StartedAt: &at, LastHeartbeatAt: &at})
	return err
}

func (e *events) JobFinished(ctx context.Context, jobID string, status status.Job, errMsg string, at time.Time) error {
	e.mu.Lock()
	e.finished[jobID] = append(e.finished[jobID], status)
	e.errs[jobID] = errMsg
	e.mu.Unlock()
	changed, err := e.st.UpdateJobStatus(ctx, jobID, nil, status, store.JobUpdate{ErrorMessage: &errMsg, CompletedAt: &at})
	if err != nil || changed {
		return err
	}
	// Nothing changed: nil only when the job is terminal already, as the
	// tracker's JobFinished promises (the dispatcher acknowledges on it).
	j, err := e.st.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	if !j.Status.IsTerminal() {
		return fmt.Errorf("job %s is %s, not terminal", jobID, j.Status)
	}
	return nil
}

func (e *events) StepStatus(ctx context.Context, s *store.Step) error {
	e.mu.Lock()
	e.steps = append(e.steps, s)
	e.mu.Unlock()
	return nil
}

func (e *events) finishedOf(jobID string) []status.Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]status.Job(nil), e.finished[jobID]...)
}

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ln := range lines {
		l.lines = append(l.lines, fmt.Sprintf("%s/%d:%s", jobID[:8], stepIndex, ln.Text))
	}
	return nil
}

// AppendFrom stores lines like Append and acknowledges all of them.
func (l *logSink) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (logstore.AppendResult, error) {
	if err := l.Append(runID, jobID, stepIndex, lines); err != nil {
		return logstore.AppendResult{}, err
	}
	return logstore.AppendResult{Stored: len(lines), Acked: offset + int64(len(lines))}, nil
}

// spawner is a Spawner double: it records requests and hands out ids.
type spawner struct {
	mu      sync.Mutex
	labels  []string
	calls   []string
	ids     []string
	err     error
	counter int
}

func (s *spawner) CanServe(labels []string) bool {
	for _, l := range labels {
		found := false
		for _, have := range s.labels {
			found = found || have == l
		}
		if !found {
			return false
		}
	}
	return true
}

// SpawnFor spawns an agent carrying exactly s.labels: ErrNoBackend when
// those lack a runsOn label or carry an exclude label.
func (s *spawner) SpawnFor(ctx context.Context, req ScaleRequest) (string, error) {
	if !s.CanServe(req.RunsOn) {
		return "", ErrNoBackend
	}
	for _, l := range req.Exclude {
		if s.CanServe([]string{l}) {
			return "", ErrNoBackend
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, req.JobID)
	if s.err != nil {
		return "", s.err
	}
	s.counter++
	id := fmt.Sprintf("kici-local-%08x", s.counter)
	s.ids = append(s.ids, id)
	return id, nil
}

func (s *spawner) Stop(string)              {}
func (s *spawner) AgentRegistered(string)   {}
func (s *spawner) AgentDisconnected(string) {}

type harness struct {
	t    *testing.T
	st   *sqlite.Store
	aa   *auth.AgentAuth
	d    *Dispatcher
	ev   *events
	logs *logSink
	url  string
}

func newHarness(t *testing.T, cfg Config, sp Spawner) *harness {
	t.Helper()
	return newHarnessWith(t, cfg, sp, Deps{})
}

// newHarnessWith is newHarness whose dispatcher also takes the
// collaborators of deps (Events is the harness's own recorder).
func newHarnessWith(t *testing.T, cfg Config, sp Spawner, deps Deps) *harness {
	t.Helper()
	st := teststore.SQLite(t) // closed after the cleanup below shuts the dispatcher down
	h := &harness{t: t, st: st, aa: auth.NewAgentAuth(st), logs: &logSink{}}
	h.ev = newEvents(st)
	var logger *slog.Logger
	if os.Getenv("KICI_TEST_DEBUG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	deps.Events = h.ev
	h.d = New(cfg, st, h.aa, h.logs, sp, logger, deps)
	srv := httptest.NewServer(h.d)
	h.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.d.Shutdown(sctx)
		srv.Close()
	})
	return h
}

// job creates a run with one queued job requiring labels.
func (h *harness) job(labels ...string) *store.Job {
	h.t.Helper()
	ctx := context.Background()
	run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", Status: status.RunPending, Provider: "local",
		RepoIdentifier: "acme/app", RepoURL: "file:///tmp/app", Ref: "refs/heads/main",
		SHA: strings.Repeat("a", 40), OrgID: "acme", CreatedAt: time.Now().UTC()}
	job := &store.Job{ID: uuid.NewString(), RunID: run.ID, JobName: "test (1.22)", BaseJobName: "test",
		MatrixValues: map[string]string{"go-version": "1.22"}, Status: status.JobQueued,
		Config: json.RawMessage(`{"name":"test","steps":[]}`), RunsOnLabels: labels, CreatedAt: time.Now().UTC()}
	if err := h.st.CreateRun(ctx, run, []*store.Job{job}); err != nil {
		h.t.Fatal(err)
	}
	return job
}

func (h *harness) enqueue(j *store.Job) {
	h.t.Helper()
	if err := h.d.EnqueueJob(context.Background(), j); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) staticToken() string {
	h.t.Helper()
	p, _, err := h.aa.IssueStatic(context.Background(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) entry(id string) *store.QueueEntry {
	h.t.Helper()
	list, err := h.st.ListQueue(context.Background(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range list {
		if e.ID == id {
			return e
		}
	}
	h.t.Fatalf("no queue entry %s", id)
	return nil
}

// getJob reads job id as stored once the pending reasons routing decided
// so far are written (they are written behind routing: reasonWriter).
func (h *harness) getJob(id string) *store.Job {
	h.t.Helper()
	h.d.queue.reasonW.wait()
	j, err := h.st.GetJob(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

// client is a test agent speaking internal/protocol over a real WebSocket.
type client struct {
	t      *testing.T
	ws     *websocket.Conn
	id     string
	resume string // the resume token of its last register.ack
}

func (h *harness) dial() *client {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, h.url, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	h.t.Cleanup(func() { ws.CloseNow() })
	return &client{t: h.t, ws: ws}
}

func (c *client) send(msg any) {
	c.t.Helper()
	b, _ := json.Marshal(msg)
	c.sendRaw(b)
}

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next decoded message, failing after 5 s.
func (c *client) read() any {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	m, err := protocol.Decode(b)
	if err != nil {
		c.t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// closed reads until the socket closes and returns the close status, with
// every message received on the way.
func (c *client) closed() (websocket.StatusCode, []any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []any
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				c.t.Fatal("socket did not close")
			}
			return websocket.CloseStatus(err), got
		}
		m, _ := protocol.Decode(b)
		got = append(got, m)
	}
}

func (c *client) auth(token string) {
	c.t.Helper()
	c.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: token, ProtocolVersion: protocol.Version})
	if _, ok := c.read().(*protocol.AuthSuccess); !ok {
		c.t.Fatal("expected auth.success")
	}
}

func (c *client) register(id string, labels ...string) *protocol.RegisterAck {
	c.t.Helper()
	c.id = id
	c.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: uuid.NewString(), AgentID: id, Labels: labels, ResumeToken: c.resume})
	ack, ok := c.read().(*protocol.RegisterAck)
	if !ok {
		c.t.Fatal("expected register.ack")
	}
	c.resume = ack.ResumeToken
	return ack
}

// agent connects a registered agent and waits until its registration drain
// is over, so that later routing is deterministic.
func (h *harness) agent(id, token string, labels ...string) *client {
	h.t.Helper()
	c := h.dial()
	c.auth(token)
	c.register(id, labels...)
	wait.For(h.t, 5*time.Second, "registration drain", func() bool { return h.d.queue.registering.Load() == 0 })
	return c
}

func (c *client) dispatch() *protocol.JobDispatch {
	c.t.Helper()
	m := c.read()
	jd, ok := m.(*protocol.JobDispatch)
	if !ok {
		c.t.Fatalf("expected job.dispatch, got %T %+v", m, m)
	}
	return jd
}

func (c *client) status(jd *protocol.JobDispatch, state status.Job) {
	c.send(&protocol.JobStatus{Type: protocol.TypeJobStatus, MessageID: uuid.NewString(), RunID: jd.RunID,
		JobID: jd.JobID, State: state, Timestamp: time.Now().UnixMilli()})
}

// ---------------------------------------------------------------- handshake

func TestHandshakeBadTokenCloses4010(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	c := h.dial()
	c.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: auth.NewAgentTokenPlaintext(), ProtocolVersion: 1})
	code, msgs := c.closed()
	if code != protocol.CloseAuthFailed {
		t.Fatalf("close %d, want 4010", code)
	}
	if len(msgs) != 1 || msgs[0].(*protocol.AuthFailure).Reason == "" {
		t.Fatalf("want one auth.failure with a reason, got %+v", msgs)
	}
}

func TestHandshakeNoAuthCloses4002(t *testing.T) {
	h := newHarness(t, Config{AuthTimeout: 200 * time.Millisecond}, nil)
	c := h.dial()
	if code, _ := c.closed(); code != protocol.CloseAuthTimeout {
		t.Fatalf("close %d, want 4002", code)
	}
}

func TestHandshakeRegisterTimeoutAndNonAuthFirst(t *testing.T) {
	h := newHarness(t, Config{RegisterTimeout: 200 * time.Millisecond}, nil)
	c := h.dial()
	c.auth(h.staticToken())
	if code, _ := c.closed(); code != protocol.CloseAuthTimeout {
		t.Fatalf("register timeout: close %d, want 4002", code)
	}
	// register without auth
	c = h.dial()
	c.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, AgentID: "a1"})
	if code, _ := c.closed(); code != protocol.CloseAuthFailed {
		t.Fatalf("register without auth: close %d, want 4010", code)
	}
}

func TestHandshakeOldProtocolCloses4005(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	c := h.dial()
	c.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: h.staticToken(), ProtocolVersion: 0})
	if code, _ := c.closed(); code != protocol.CloseProtocolError {
		t.Fatalf("close %d, want 4005", code)
	}
}

func TestEphemeralTokenWrongAgentIDCloses4010(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	tok, err := h.aa.IssueEphemeral(context.Background(), "kici-local-11111111", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	c.auth(tok)
	c.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, AgentID: "kici-local-22222222"})
	if code, _ := c.closed(); code != protocol.CloseAuthFailed {
		t.Fatalf("close %d, want 4010", code)
	}
	// the bound id is accepted
	c = h.dial()
	c.auth(tok)
	if ack := c.register("kici-local-11111111"); !ack.ScalerManaged {
		t.Fatal("ephemeral agent not reported scaler-managed")
	}
}

func TestAgentIDCollisionAndSameTokenReplace(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	tokA := h.staticToken()
	first := h.agent("host-1", tokA)

	other := h.dial()
	other.auth(h.staticToken())
	other.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, AgentID: "host-1"})
	if code, _ := other.closed(); code != protocol.CloseInvalidMessage {
		t.Fatalf("collision: close %d, want 4003", code)
	}

	// the same token without the session's resume token is refused too
	// (session_test.go); with it, the newer socket replaces the older
	second := h.agentResuming("host-1", tokA, first.resume)
	if code, _ := first.closed(); code != protocol.CloseNormal {
		t.Fatalf("replaced socket: close %d, want 1000", code)
	}
	// the replacement is the registered one and works
	j := h.job()
	h.enqueue(j)
	if jd := second.dispatch(); jd.JobID != j.ID {
		t.Fatal("wrong job")
	}
	if n := len(h.d.Agents()); n != 1 {
		t.Fatalf("%d agents listed", n)
	}
}

func TestInvalidMessageCloses4003(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	c := h.agent("a1", h.staticToken())
	c.sendRaw([]byte(`{"type":"job.status",`))
	code, msgs := c.closed()
	if code != protocol.CloseInvalidMessage {
		t.Fatalf("close %d, want 4003", code)
	}
	if len(msgs) != 1 || msgs[0].(*protocol.ErrorMessage).Code != protocol.ErrorInvalidMessage {
		t.Fatalf("want an INVALID_MESSAGE error frame, got %+v", msgs)
	}
	// unknown types are ignored, the socket stays up. The closed a1 leaves
	// the registry a moment after its socket closed: the job must not race
	// it there.
	wait.For(t, 5*time.Second, "a1 to leave the registry", func() bool {
		for _, a := range h.d.Agents() {
			if a.ID == "a1" {
				return false
			}
		}
		return true
	})
	c = h.agent("a2", h.staticToken())
	c.sendRaw([]byte(`{"type":"agent.metrics","metrics":[]}`))
	j := h.job()
	h.enqueue(j)
	c.dispatch()
}

func TestCloseReasonTruncated(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	got := truncateReason(s)
	if len(got) > 123 || !strings.HasPrefix(s, got) || len(got) != 122 {
		t.Fatalf("truncated to %d bytes", len(got))
	}
}

// ---------------------------------------------------------------- routing

func TestDispatchToLowestIdleMatchingAgent(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	b := h.agent("agent-b", h.staticToken(), "linux", "docker")
	a := h.agent("agent-a", h.staticToken(), "linux", "docker")
	_ = h.agent("agent-0", h.staticToken(), "windows")

	j := h.job("linux", "docker")
	h.enqueue(j)
	jd := a.dispatch()
	if jd.JobID != j.ID || jd.RunID != j.RunID || jd.JobName != "test (1.22)" || jd.WorkflowName != "ci" ||
		jd.RepoURL != "file:///tmp/app" || jd.Ref != "refs/heads/main" || jd.SHA != strings.Repeat("a", 40) {
		t.Fatalf("dispatch %+v", jd)
	}
	if string(jd.JobConfig) != `{"name":"test","steps":[]}` || jd.MatrixValues["go-version"] != "1.22" {
		t.Fatalf("config/matrix %s %v", jd.JobConfig, jd.MatrixValues)
	}
	want := map[string]string{"CI": "true", "KICI": "true", "KICI_RUN_ID": j.RunID, "KICI_JOB_ID": j.ID,
		"KICI_JOB_NAME": "test (1.22)", "KICI_WORKFLOW_NAME": "ci", "KICI_REPO": "acme/app",
		"KICI_REF": "refs/heads/main", "KICI_SHA": strings.Repeat("a", 40), "KICI_ORG_ID": "acme",
		"KICI_MATRIX_GO_VERSION": "1.22"}
	for k, v := range want {
		if jd.Env[k] != v {
			t.Errorf("env %s=%q, want %q", k, jd.Env[k], v)
		}
	}
	e := h.entry(j.ID)
	if e.Status != store.QueueDispatched || e.AgentID != "agent-a" || e.AckDeadline == nil {
		t.Fatalf("queue entry %+v", e)
	}
	// the busy agent-a is skipped: the next job goes to agent-b
	j2 := h.job("linux")
	h.enqueue(j2)
	if jd := b.dispatch(); jd.JobID != j2.ID {
		t.Fatal("second job not on agent-b")
	}
	// ack clears the deadline
	a.send(&protocol.JobAck{Type: protocol.TypeJobAck, RunID: jd.RunID, JobID: jd.JobID})
	wait.For(t, 5*time.Second, "ack persisted", func() bool { return h.entry(j.ID).AckDeadline == nil })
}

func TestPendingReasons(t *testing.T) {
	sp := &spawner{labels: []string{"kici:os:linux"}, err: fmt.Errorf("%w (1/1 agents)", ErrAtCapacity)}
	h := newHarness(t, Config{}, sp)
	j := h.job("gpu")
	h.enqueue(j)
	if r := h.getJob(j.ID).PendingReason; r != "unroutable: no agent online; no scaler label set serves runsOn [gpu]" {
		t.Fatalf("reason %q", r)
	}
	if len(sp.calls) != 0 {
		t.Fatal("spawner asked for labels it cannot serve")
	}
	_ = h.agent("a1", h.staticToken(), "linux")
	j2 := h.job("gpu", "cuda")
	h.enqueue(j2)
	if r := h.getJob(j2.ID).PendingReason; r != "unroutable: no agent with labels [cuda gpu]; no scaler label set serves runsOn [cuda gpu]" {
		t.Fatalf("reason %q", r)
	}
	j3 := h.job("linux")
	h.enqueue(j3) // takes a1
	j4 := h.job("linux")
	h.enqueue(j4)
	if r := h.getJob(j4.ID).PendingReason; r != "all matching agents busy" {
		t.Fatalf("reason %q", r)
	}
	j5 := h.job("kici:os:linux")
	h.enqueue(j5)
	if r := h.getJob(j5.ID).PendingReason; r != "scaler at capacity (1/1 agents)" {
		t.Fatalf("reason %q", r)
	}
	sp.mu.Lock()
	sp.err = errors.New("exec: no such file")
	sp.mu.Unlock()
	j6 := h.job("kici:os:linux")
	h.enqueue(j6)
	if r := h.getJob(j6.ID).PendingReason; r != "spawn failed: exec: no such file" {
		t.Fatalf("reason %q", r)
	}
}

func TestNoAgentSpawnsPinsAndDispatchesToSpawnedAgent(t *testing.T) {
	sp := &spawner{labels: []string{"kici:os:linux", "kici:arch:amd64"}}
	h := newHarness(t, Config{}, sp)
	j := h.job("kici:os:linux")
	h.enqueue(j)
	if len(sp.calls) != 1 || sp.calls[0] != j.ID {
		t.Fatalf("spawner calls %v", sp.calls)
	}
	id := sp.ids[0]
	if e := h.entry(j.ID); e.Status != store.QueuePending || e.PinnedAgentID != id {
		t.Fatalf("entry %+v", e)
	}
	if r := h.getJob(j.ID).PendingReason; r != "spawning agent "+id {
		t.Fatalf("reason %q", r)
	}
	// a static agent with the labels arriving meanwhile does not steal it
	other := h.agent("aaa-static", h.staticToken(), "kici:os:linux")
	// an older unpinned job exists too; the spawned agent still gets its own
	tok, err := h.aa.IssueEphemeral(context.Background(), id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	c.auth(tok)
	ack := c.register(id, "kici:os:linux", "kici:arch:amd64")
	if !ack.PendingDispatch || !ack.ScalerManaged {
		t.Fatalf("register.ack %+v", ack)
	}
	if jd := c.dispatch(); jd.JobID != j.ID {
		t.Fatal("spawned agent got another job")
	}
	// single use: after finishing, no further job goes to the spawned agent
	jd := &protocol.JobDispatch{RunID: j.RunID, JobID: j.ID}
	c.status(jd, status.JobRunning)
	c.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "finished", func() bool { return len(h.ev.finishedOf(j.ID)) == 1 })
	j2 := h.job("kici:os:linux")
	h.enqueue(j2)
	if jd := other.dispatch(); jd.JobID != j2.ID {
		t.Fatal("follow-up job not on the static agent")
	}
}

func TestSpawnTimeoutUnpinsAndRedrives(t *testing.T) {
	sp := &spawner{labels: []string{"kici:os:linux"}}
	h := newHarness(t, Config{SpawnTimeout: 200 * time.Millisecond, RedriveInterval: 50 * time.Millisecond}, sp)
	h.d.Start(context.Background())
	j := h.job("kici:os:linux")
	h.enqueue(j)
	first := sp.ids[0]
	wait.For(t, 5*time.Second, "second spawn after the timeout", func() bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return len(sp.ids) >= 2
	})
	// The pin to the new agent is written once its spawn returns, just
	// after the spawner saw the request.
	var e *store.QueueEntry
	wait.For(t, 5*time.Second, "the entry pinned to the new agent", func() bool {
		e = h.entry(j.ID)
		return e.PinnedAgentID != first && e.PinnedAgentID != ""
	})
	if e.PinnedAgentID == first || e.PinnedAgentID == "" {
		t.Fatalf("entry still pinned to %q", e.PinnedAgentID)
	}
	// a spawned agent that exits before registering also releases its job
	sp.mu.Lock()
	second := sp.ids[len(sp.ids)-1]
	n := len(sp.ids)
	sp.mu.Unlock()
	h.d.AgentExited(second, errors.New("exit status 1"))
	wait.For(t, 5*time.Second, "respawn after exit", func() bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return len(sp.ids) > n
	})
}

// ---------------------------------------------------------------- acks, rejects

func TestAckTimeoutRequeuesAndCloses4031(t *testing.T) {
	h := newHarness(t, Config{AckTimeout: 300 * time.Millisecond}, nil)
	c := h.agent("slow", h.staticToken())
	j := h.job()
	h.enqueue(j)
	c.dispatch()
	code, msgs := c.closed()
	if code != protocol.CloseAckTimeout {
		t.Fatalf("close %d, want 4031", code)
	}
	if len(msgs) != 1 {
		t.Fatalf("want a best-effort job.cancel, got %+v", msgs)
	}
	if jc, ok := msgs[0].(*protocol.JobCancel); !ok || jc.JobID != j.ID {
		t.Fatalf("got %+v", msgs[0])
	}
	wait.For(t, 5*time.Second, "requeued", func() bool { return h.entry(j.ID).Status == store.QueuePending })
	if e := h.entry(j.ID); e.Attempts != 1 || e.AgentID != "" {
		t.Fatalf("entry %+v", e)
	}
	if len(h.d.Agents()) != 0 {
		t.Fatal("timed-out agent still registered")
	}
	// the requeued job goes to the next agent
	c2 := h.agent("fast", h.staticToken())
	if jd := c2.dispatch(); jd.JobID != j.ID {
		t.Fatal("requeued job not redispatched")
	}
}

func TestRejectRequeuesAndFifthAttemptFails(t *testing.T) {
	h := newHarness(t, Config{RedriveInterval: 30 * time.Millisecond}, nil)
	h.d.Start(context.Background())
	c := h.agent("picky", h.staticToken())
	j := h.job()
	h.enqueue(j)
	for i := 1; i <= 5; i++ {
		jd := c.dispatch()
		if jd.JobID != j.ID {
			t.Fatal("wrong job")
		}
		c.send(&protocol.JobReject{Type: protocol.TypeJobReject, RunID: jd.RunID, JobID: jd.JobID, Reason: protocol.RejectBusy})
		if i < 5 {
			wait.For(t, 5*time.Second, "requeued", func() bool {
				e := h.entry(j.ID)
				return e.Attempts == i
			})
		}
	}
	wait.For(t, 5*time.Second, "job failed", func() bool { return len(h.ev.finishedOf(j.ID)) == 1 })
	if got := h.ev.finishedOf(j.ID)[0]; got != status.JobFailed {
		t.Fatalf("status %s", got)
	}
	h.ev.mu.Lock()
	msg := h.ev.errs[j.ID]
	h.ev.mu.Unlock()
	if !strings.HasPrefix(msg, "re-dispatch attempts exhausted after 5 attempts") {
		t.Fatalf("error %q", msg)
	}
	if e := h.entry(j.ID); e.Status != store.QueueFailed {
		t.Fatalf("entry %+v", e)
	}
}

func TestRejectGoesToAnotherAgent(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	a := h.agent("a", h.staticToken())
	b := h.agent("b", h.staticToken())
	j := h.job()
	h.enqueue(j)
	jd := a.dispatch()
	a.send(&protocol.JobReject{Type: protocol.TypeJobReject, RunID: jd.RunID, JobID: jd.JobID, Reason: protocol.RejectDraining})
	if jd := b.dispatch(); jd.JobID != j.ID {
		t.Fatal("rejected job not sent to b")
	}
	if e := h.entry(j.ID); e.Attempts != 1 || e.AgentID != "b" {
		t.Fatalf("entry %+v", e)
	}
}

// ---------------------------------------------------------------- statuses

func TestJobLifecycleExactlyOnceAndOwnership(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	owner := h.agent("a-owner", h.staticToken())
	intruder := h.agent("z-intruder", h.staticToken(), "other")
	j := h.job()
	h.enqueue(j)
	jd := owner.dispatch()

	// the intruder's claims about the job are dropped
	intruder.status(jd, status.JobRunning)
	intruder.status(jd, status.JobSuccess)
	owner.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "started", func() bool { return h.getJob(j.ID).Status == status.JobRunning })
	h.ev.mu.Lock()
	starts := h.ev.started[j.ID]
	h.ev.mu.Unlock()
	if starts != 1 || len(h.ev.finishedOf(j.ID)) != 0 {
		t.Fatalf("starts %d finishes %v", starts, h.ev.finishedOf(j.ID))
	}
	if h.getJob(j.ID).AgentID != "a-owner" {
		t.Fatal("job started on the wrong agent")
	}

	exit := 0
	owner.send(&protocol.StepStatus{Type: protocol.TypeStepStatus, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0,
		StepName: "build", State: status.StepSuccess, Data: &protocol.StepStatusData{ExitCode: &exit, DurationMs: 12}})
	for _, seq := range []int64{0, 1, 1, 0, 2} {
		owner.send(&protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: jd.RunID, JobID: jd.JobID, StepIndex: 0,
			Seq: seq, Lines: []protocol.LogLine{{Text: fmt.Sprintf("line %d", seq)}}})
	}
	owner.send(&protocol.JobHeartbeat{Type: protocol.TypeJobHeartbeat, RunID: jd.RunID, JobID: jd.JobID})
	owner.status(jd, status.JobSuccess)
	owner.status(jd, status.JobSuccess) // replay
	wait.For(t, 5*time.Second, "finished", func() bool { return len(h.ev.finishedOf(j.ID)) > 0 })
	// a later replay from the owner (after the 30 s grace the DB vouches) is a no-op too
	owner.status(jd, status.JobFailed)
	// a heartbeat round-trip orders the check after the replays
	owner.send(&protocol.Heartbeat{Type: protocol.TypeHeartbeat})
	wait.Elapse(t.Context(), 100*time.Millisecond) // room for a finish that must not come
	if got := h.ev.finishedOf(j.ID); len(got) != 1 || got[0] != status.JobSuccess {
		t.Fatalf("JobFinished calls %v", got)
	}
	if e := h.entry(j.ID); e.Status != store.QueueCompleted {
		t.Fatalf("entry %+v", e)
	}
	h.logs.mu.Lock()
	lines := strings.Join(h.logs.lines, ",")
	h.logs.mu.Unlock()
	if lines != j.ID[:8]+"/0:line 0,"+j.ID[:8]+"/0:line 1,"+j.ID[:8]+"/0:line 2" {
		t.Fatalf("log lines %s", lines)
	}
	h.ev.mu.Lock()
	if len(h.ev.steps) != 1 || h.ev.steps[0].Status != status.StepSuccess || *h.ev.steps[0].ExitCode != 0 || h.ev.steps[0].RunID != j.RunID {
		t.Fatalf("steps %+v", h.ev.steps)
	}
	h.ev.mu.Unlock()
	if h.getJob(j.ID).LastHeartbeatAt == nil {
		t.Fatal("job heartbeat not stored")
	}
	if a := h.d.Agents(); a[0].ID != "a-owner" || a[0].ActiveJobs != 0 {
		t.Fatalf("agents %+v", a)
	}
}

func TestOwnershipViolationsClose1001(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	owner := h.agent("a-owner", h.staticToken())
	intruder := h.agent("z-intruder", h.staticToken(), "x")
	j := h.job()
	h.enqueue(j)
	jd := owner.dispatch()
	for i := 0; i < 5; i++ {
		intruder.send(&protocol.JobHeartbeat{Type: protocol.TypeJobHeartbeat, RunID: jd.RunID, JobID: jd.JobID})
	}
	if code, _ := intruder.closed(); code != protocol.CloseGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
}

func TestConcurrentDrainsNeverDoubleDispatch(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	const nJobs, nAgents = 30, 6
	var jobs []*store.Job
	for i := 0; i < nJobs; i++ {
		jobs = append(jobs, h.job())
	}
	// half the jobs are queued before any agent exists, half while agents register
	for _, j := range jobs[:nJobs/2] {
		h.enqueue(j)
	}
	var mu sync.Mutex
	dispatched := map[string][]string{}
	var wg sync.WaitGroup
	for i := 0; i < nAgents; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := h.agent(fmt.Sprintf("agent-%d", i), h.staticToken())
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, b, err := c.ws.Read(ctx)
				cancel()
				if err != nil {
					return // idle: no more work
				}
				m, _ := protocol.Decode(b)
				jd, ok := m.(*protocol.JobDispatch)
				if !ok {
					continue
				}
				mu.Lock()
				dispatched[jd.JobID] = append(dispatched[jd.JobID], c.id)
				mu.Unlock()
				c.status(jd, status.JobRunning)
				c.status(jd, status.JobSuccess)
			}
		}(i)
	}
	var eg sync.WaitGroup
	for _, j := range jobs[nJobs/2:] {
		eg.Add(1)
		go func(j *store.Job) {
			defer eg.Done()
			if err := h.d.EnqueueJob(context.Background(), j); err != nil {
				t.Error(err)
			}
		}(j)
	}
	eg.Wait()
	wg.Wait()
	for _, j := range jobs {
		if got := dispatched[j.ID]; len(got) != 1 {
			t.Errorf("job %s dispatched to %v", j.ID, got)
		}
		if got := h.ev.finishedOf(j.ID); len(got) != 1 {
			t.Errorf("job %s finished %v", j.ID, got)
		}
	}
}

// ---------------------------------------------------------------- disconnects

func TestHeartbeatTimeoutTriage(t *testing.T) {
	// 2 s: creating, queueing and delivering a job, and the running
	// status, come well before it on a starved machine.
	h := newHarness(t, Config{HeartbeatTimeout: 2 * time.Second, HeartbeatCheckInterval: 50 * time.Millisecond,
		AckTimeout: time.Minute}, nil)
	h.d.Start(context.Background())

	// static agent, job dispatched but never started ⇒ requeued
	s := h.agent("static", h.staticToken(), "s")
	j1 := h.job("s")
	h.enqueue(j1)
	s.dispatch()
	if code, _ := s.closed(); code != protocol.CloseHeartbeatTimeout {
		t.Fatalf("close %d, want 4004", code)
	}
	wait.For(t, 5*time.Second, "requeue", func() bool { e := h.entry(j1.ID); return e.Status == store.QueuePending && e.Attempts == 1 })

	// ephemeral agent with a started job ⇒ job fails fast
	tok, _ := h.aa.IssueEphemeral(context.Background(), "kici-local-0000abcd", time.Hour)
	e := h.dial()
	e.auth(tok)
	e.register("kici-local-0000abcd", "e")
	j2 := h.job("e")
	h.enqueue(j2)
	jd := e.dispatch()
	e.status(jd, status.JobRunning)
	if code, _ := e.closed(); code != protocol.CloseHeartbeatTimeout {
		t.Fatalf("close %d, want 4004", code)
	}
	wait.For(t, 5*time.Second, "fail fast", func() bool { return len(h.ev.finishedOf(j2.ID)) == 1 })
	h.ev.mu.Lock()
	msg := h.ev.errs[j2.ID]
	h.ev.mu.Unlock()
	if !strings.Contains(msg, "agent lost") {
		t.Fatalf("error %q", msg)
	}
	if en := h.entry(j2.ID); en.Status != store.QueueFailed {
		t.Fatalf("entry %+v", en)
	}
}

func TestStaticAgentReconnectKeepsStartedJob(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	tok := h.staticToken()
	c := h.agent("host", tok)
	j := h.job()
	h.enqueue(j)
	jd := c.dispatch()
	c.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "started", func() bool { return h.getJob(j.ID).Status == status.JobRunning })
	c.ws.Close(websocket.StatusNormalClosure, "bye")
	wait.For(t, 5*time.Second, "unregistered", func() bool { return len(h.d.Agents()) == 0 })

	c2 := h.dial()
	c2.auth(tok)
	c2.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, AgentID: "host", ResumeToken: c.resume,
		InFlightJobs: []protocol.InFlightJob{{JobID: j.ID, RunID: j.RunID}}})
	if _, ok := c2.read().(*protocol.RegisterAck); !ok {
		t.Fatal("no register.ack")
	}
	if a := h.d.Agents(); len(a) != 1 || a[0].ActiveJobs != 1 {
		t.Fatalf("agents %+v", a)
	}
	c2.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "finished", func() bool { return len(h.ev.finishedOf(j.ID)) == 1 })
}

// A pending reason another node wrote on a job is cleared when this node
// dispatches it, although this node never wrote one for it.
func TestDispatchClearsAReasonWrittenElsewhere(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	_ = h.agent("a1", h.staticToken(), "linux")
	j := h.job("linux")
	reason := "all matching agents busy"
	if _, err := h.st.UpdateJobStatus(context.Background(), j.ID, []status.Job{status.JobQueued}, status.JobQueued,
		store.JobUpdate{PendingReason: &reason}); err != nil {
		t.Fatal(err)
	}
	h.enqueue(j)
	// The reason is cleared after the claim, before the message is sent.
	wait.For(t, 5*time.Second, "dispatched job's reason cleared", func() bool {
		return h.entry(j.ID).Status == store.QueueDispatched && h.getJob(j.ID).PendingReason == ""
	})
}
