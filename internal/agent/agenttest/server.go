// Package agenttest provides a fake orchestrator for agent tests: an
// httptest server speaking internal/protocol over coder/websocket that
// records every agent frame and lets a test dispatch, cancel and drop
// connections.
package agenttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"github.com/coder/websocket"

	"kici.dev/kici/internal/protocol"
)

// Options configures a Server.
type Options struct {
	// Token, if set, is the only accepted agent token; a connection must
	// start with auth.request. A wrong token gets auth.failure and close
	// 4010.
	Token string
	// PendingDispatch is echoed in register.ack.
	PendingDispatch bool
	// StatusAcks is register.ack's StatusAcks: the test then answers
	// terminal job statuses with job.status.ack itself (Send).
	StatusAcks bool
}

// Received is one frame from the agent with the connection it came on
// (1-based, in accept order).
type Received struct {
	// Conn is the 1-based number of the registered connection.
	Conn int
	// Msg is the decoded frame (a pointer to a protocol struct).
	Msg any
}

// Server is a fake orchestrator. Its methods are safe for concurrent use.
type Server struct {
	// URL is the ws:// URL of the /ws endpoint.
	URL string

	opts    Options
	hs      *httptest.Server
	mu      sync.Mutex
	changed chan struct{}
	conns   int
	current *websocket.Conn
	regs    []*protocol.AgentRegister
	msgs    []Received
	authErr int
	refuse  bool
	refused int
}

// Refuse makes the server answer new WebSocket requests with HTTP 503 (on)
// or accept them again (off), to keep an agent disconnected for a while.
func (s *Server) Refuse(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = on
}

// Refused counts connection attempts answered with 503.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// NewServer starts a Server that is closed when t ends.
func NewServer(t testing.TB, opts Options) *Server {
	s := &Server{opts: opts, changed: make(chan struct{})}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = "ws" + strings.TrimPrefix(s.hs.URL, "http") + "/ws"
	t.Cleanup(func() {
		s.mu.Lock()
		if s.current != nil {
			s.current.CloseNow()
		}
		s.mu.Unlock()
		s.hs.Close()
	})
	return s
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	refuse := s.refuse
	if refuse {
		s.refused++
		s.notify()
	}
	s.mu.Unlock()
	if refuse {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	defer ws.CloseNow()
	ctx := r.Context()
	read := func() (any, error) {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return nil, err
		}
		return protocol.Decode(data)
	}
	if s.opts.Token != "" {
		msg, err := read()
		if err != nil {
			return
		}
		req, ok := msg.(*protocol.AuthRequest)
		if !ok || req.Token != s.opts.Token {
			s.mu.Lock()
			s.authErr++
			s.notify()
			s.mu.Unlock()
			_ = s.write(ctx, ws, &protocol.AuthFailure{Type: protocol.TypeAuthFailure, Reason: "Invalid token"})
			ws.Close(protocol.CloseAuthFailed, "auth failed")
			return
		}
		_ = s.write(ctx, ws, &protocol.AuthSuccess{Type: protocol.TypeAuthSuccess, ConnectionID: "c"})
	}
	msg, err := read()
	if err != nil {
		return
	}
	reg, ok := msg.(*protocol.AgentRegister)
	if !ok {
		ws.Close(protocol.CloseInvalidMessage, "expected agent.register")
		return
	}
	if err := s.write(ctx, ws, &protocol.RegisterAck{Type: protocol.TypeRegisterAck, AgentID: reg.AgentID, Labels: reg.Labels, PendingDispatch: s.opts.PendingDispatch, StatusAcks: s.opts.StatusAcks && reg.StatusAcks}); err != nil {
		return
	}
	// Only now may tests send: the ack must be the first frame.
	s.mu.Lock()
	s.conns++
	connNo := s.conns
	s.current = ws
	s.regs = append(s.regs, reg)
	s.notify()
	s.mu.Unlock()
	for {
		msg, err := read()
		if err != nil {
			s.mu.Lock()
			if s.current == ws {
				s.current = nil
			}
			s.notify()
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.msgs = append(s.msgs, Received{Conn: connNo, Msg: msg})
		s.notify()
		s.mu.Unlock()
	}
}

func (s *Server) write(ctx context.Context, ws *websocket.Conn, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, b)
}

// Send writes msg to the current connection.
func (s *Server) Send(msg any) error {
	s.mu.Lock()
	ws := s.current
	s.mu.Unlock()
	if ws == nil {
		return fmt.Errorf("agenttest: no agent connected")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.write(ctx, ws, msg)
}

// Drop closes the current connection abruptly (no close handshake).
func (s *Server) Drop() {
	s.mu.Lock()
	ws := s.current
	s.current = nil
	s.mu.Unlock()
	if ws != nil {
		ws.CloseNow()
	}
}

// Registrations returns every agent.register received so far.
func (s *Server) Registrations() []*protocol.AgentRegister {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*protocol.AgentRegister(nil), s.regs...)
}

// AuthFailures counts refused auth requests.
func (s *Server) AuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authErr
}

// Messages returns every frame received after registration, in order.
func (s *Server) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.msgs...)
}

// Connected reports whether an agent connection is registered now.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil
}

// WaitUntil blocks until cond (evaluated under the server lock against the
// server state) returns true, or fails t after timeout.
func (s *Server) WaitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			for _, m := range s.Messages() {
				t.Logf("agenttest: received on connection %d: %T %+v", m.Conn, m.Msg, m.Msg)
			}
			t.Fatalf("agenttest: timed out after %s waiting for %s", timeout, what)
		}
	}
}

// WaitRegistrations waits until n registrations happened.
func (s *Server) WaitRegistrations(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	s.WaitUntil(t, timeout, fmt.Sprintf("%d registrations", n), func() bool { return len(s.regs) >= n && s.current != nil })
}

// WaitMessage waits for the first received frame matching pred and
// returns it.
func (s *Server) WaitMessage(t testing.TB, timeout time.Duration, what string, pred func(Received) bool) Received {
	t.Helper()
	var got Received
	s.WaitUntil(t, timeout, what, func() bool {
		for _, m := range s.msgs {
			if pred(m) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// WaitJobTerminal waits for a terminal job.status of jobID.
func (s *Server) WaitJobTerminal(t testing.TB, jobID string, timeout time.Duration) (*protocol.JobStatus, int) {
	t.Helper()
	r := s.WaitMessage(t, timeout, "terminal job.status for "+jobID, func(r Received) bool {
		js, ok := r.Msg.(*protocol.JobStatus)
		return ok && js.JobID == jobID && js.State != status.JobRunning
	})
	return r.Msg.(*protocol.JobStatus), r.Conn
}

// StepStatuses returns the step.status frames of jobID in arrival order.
func (s *Server) StepStatuses(jobID string) []*protocol.StepStatus {
	var out []*protocol.StepStatus
	for _, r := range s.Messages() {
		if ss, ok := r.Msg.(*protocol.StepStatus); ok && ss.JobID == jobID {
			out = append(out, ss)
		}
	}
	return out
}

// FinalStepStatuses maps step index to its last reported status.
func (s *Server) FinalStepStatuses(jobID string) map[int]*protocol.StepStatus {
	out := map[int]*protocol.StepStatus{}
	for _, ss := range s.StepStatuses(jobID) {
		out[ss.StepIndex] = ss
	}
	return out
}

// Logs returns the log chunks of jobID in arrival order.
func (s *Server) Logs(jobID string) []*protocol.LogChunk {
	var out []*protocol.LogChunk
	for _, r := range s.Messages() {
		if lc, ok := r.Msg.(*protocol.LogChunk); ok && lc.JobID == jobID {
			out = append(out, lc)
		}
	}
	return out
}

// LogText joins the lines of step stepIndex of jobID, one per line.
func (s *Server) LogText(jobID string, stepIndex int) string {
	var b strings.Builder
	for _, lc := range s.Logs(jobID) {
		if lc.StepIndex != stepIndex {
			continue
		}
		for _, l := range lc.Lines {
			b.WriteString(l.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Dispatch builds a job.dispatch for cfg (marshalled as the jobConfig) and
// sends it.
func (s *Server) Dispatch(t testing.TB, d *protocol.JobDispatch, cfg any) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.Type = protocol.TypeJobDispatch
	d.JobConfig = b
	if d.MessageID == "" {
		d.MessageID = "m-" + d.JobID
	}
	if d.Timestamp == 0 {
		d.Timestamp = time.Now().UnixMilli()
	}
	if err := s.Send(d); err != nil {
		t.Fatal(err)
	}
}
