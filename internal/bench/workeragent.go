package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// workerAgent is a protocol client that takes jobs: it acknowledges each
// job.dispatch, reports the job successful at once and notes when the
// dispatch arrived. It measures dispatch (trigger → job.dispatch at an
// agent) without a real agent's start-up and checkout.
type workerAgent struct {
	ws *websocket.Conn

	mu       sync.Mutex
	arrivals map[string]time.Time // job id → job.dispatch received
	notify   chan struct{}        // a buffered wake-up per arrival
}

// dialWorker connects a workerAgent with id, registering labels.
func dialWorker(ctx context.Context, url, token, id string, labels []string) (*workerAgent, error) {
	ws, err := handshake(ctx, url, token, id, labels)
	if err != nil {
		return nil, err
	}
	w := &workerAgent{ws: ws, arrivals: map[string]time.Time{}, notify: make(chan struct{}, 1024)}
	go w.serve()
	return w, nil
}

// serve answers the orchestrator until the socket closes.
func (w *workerAgent) serve() {
	ctx := context.Background()
	for {
		_, b, err := w.ws.Read(ctx)
		if err != nil {
			return
		}
		var env protocol.Envelope
		if json.Unmarshal(b, &env) != nil || env.Type != protocol.TypeJobDispatch {
			continue
		}
		at := time.Now()
		var d protocol.JobDispatch
		if json.Unmarshal(b, &d) != nil {
			continue
		}
		w.mu.Lock()
		w.arrivals[d.JobID] = at
		w.mu.Unlock()
		select {
		case w.notify <- struct{}{}:
		default:
		}
		now := time.Now().UnixMilli()
		_ = writeJSON(ctx, w.ws, &protocol.JobAck{Type: protocol.TypeJobAck, RunID: d.RunID, JobID: d.JobID, Timestamp: now})
		_ = writeJSON(ctx, w.ws, &protocol.JobStatus{Type: protocol.TypeJobStatus, MessageID: uuid.NewString(),
			RunID: d.RunID, JobID: d.JobID, State: status.JobSuccess, Timestamp: now})
	}
}

// waitArrival waits for the dispatch of any job not in seen and returns
// its id and arrival time.
func (w *workerAgent) waitArrival(ctx context.Context, seen map[string]bool) (string, time.Time, error) {
	for {
		w.mu.Lock()
		for id, at := range w.arrivals {
			if !seen[id] {
				w.mu.Unlock()
				return id, at, nil
			}
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", time.Time{}, fmt.Errorf("no job dispatched to the worker: %w", ctx.Err())
		case <-w.notify:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *workerAgent) close() { w.ws.CloseNow() }

// handshake dials url and authenticates and registers like kici-agent.
func handshake(ctx context.Context, url, token, id string, labels []string) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	recv := func(want protocol.MessageType) error {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		var env protocol.Envelope
		_ = json.Unmarshal(b, &env)
		if env.Type != want {
			return fmt.Errorf("got %s, want %s: %s", env.Type, want, b)
		}
		return nil
	}
	steps := []func() error{
		func() error {
			return writeJSON(ctx, ws, &protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: token, ProtocolVersion: protocol.Version})
		},
		func() error { return recv(protocol.TypeAuthSuccess) },
		func() error {
			return writeJSON(ctx, ws, &protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: uuid.NewString(), AgentID: id,
				Labels: labels, Version: "bench", Hostname: "bench"})
		},
		func() error { return recv(protocol.TypeRegisterAck) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			ws.CloseNow()
			return nil, err
		}
	}
	return ws, nil
}

func writeJSON(ctx context.Context, ws *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, b)
}

// mintToken registers an agent token for labels and returns it.
func (o *orch) mintToken(labels ...string) (string, error) {
	out, err := o.admin("agent", "register", "--labels", strings.Join(labels, ","))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "token:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no token in %q", out)
}

// dispatchLatency pushes to the curve workflow n times, one after the
// other, and returns the time from sending each webhook to its job's
// job.dispatch reaching w.
func dispatchLatency(ctx context.Context, o *orch, s *source, sha string, w *workerAgent, n int) ([]time.Duration, error) {
	seen := map[string]bool{}
	w.mu.Lock()
	for id := range w.arrivals {
		seen[id] = true
	}
	w.mu.Unlock()
	var out []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, _, err := o.push(s, "refs/heads/curve", sha, sha); err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		id, at, err := w.waitArrival(wctx, seen)
		cancel()
		if err != nil {
			return nil, err
		}
		seen[id] = true
		out = append(out, at.Sub(t0))
	}
	return out, nil
}
