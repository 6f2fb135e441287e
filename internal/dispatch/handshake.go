package dispatch

// The agent channel's handshake: WebSocket upgrade, auth.request within
// AuthTimeout, agent.register within RegisterTimeout.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// serve runs one agent connection (Dispatcher.ServeHTTP).
func (r *registry) serve(w http.ResponseWriter, req *http.Request) {
	if r.isClosed() {
		http.Error(w, "orchestrator shutting down", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, req, nil)
	if err != nil {
		r.log.Debug("websocket accept", "err", err)
		return
	}
	// Until the agent has authenticated and registered, a frame may be at
	// most PreAuthFrameBytes: an unauthenticated peer must not make the
	// orchestrator buffer 25 MiB frames.
	ws.SetReadLimit(PreAuthFrameBytes)
	c := &agentConn{ws: ws, closeDone: make(chan struct{}), connectedAt: time.Now().UTC(), lastSeen: time.Now().UTC(), maxConc: 1}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = ws.Close(websocket.StatusCode(protocol.CloseGoingAway), "orchestrator shutting down")
		return
	}
	r.conns[c] = true
	r.handlers.Add(1)
	r.mu.Unlock()
	defer r.handlers.Done()

	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	frames := make(chan []byte)
	readDone := make(chan error, 1)
	go func() {
		for {
			b, err := readFrame(ctx, ws)
			if err != nil {
				readDone <- err
				return
			}
			select {
			case frames <- b:
			case <-ctx.Done():
				readDone <- ctx.Err()
				return
			}
		}
	}()

	tok := r.handshake(ctx, c, frames, readDone)
	if tok != nil {
		ws.SetReadLimit(protocol.MaxFrameBytes)
		r.fr.serveRegistered(ctx, c, tok, frames, readDone)
	}
	c.close(protocol.CloseNormal, "")
	// Let the close frame go out before the read context is cancelled
	// (cancelling a read tears the connection down without a close frame).
	<-c.closeDone
	cancel()
	r.onDisconnect(c)
}

// next waits for one frame until timeout. ok=false when the socket ended
// (or, with timedOut, the timer fired).
func next(frames <-chan []byte, readDone <-chan error, timeout time.Duration) (frame []byte, timedOut, ok bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case b := <-frames:
		return b, false, true
	case <-readDone:
		return nil, false, false
	case <-t.C:
		return nil, true, false
	}
}

// PreAuthFrameBytes caps a frame before the handshake completes: 64 KiB,
// plenty for auth.request and agent.register.
const PreAuthFrameBytes = 64 << 10

// handshake runs auth and the first registration; it returns the agent's
// token when the agent is registered, else nil (the socket is closing).
func (r *registry) handshake(ctx context.Context, c *agentConn, frames <-chan []byte, readDone <-chan error) *store.AgentToken {
	frame, timedOut, ok := next(frames, readDone, r.cfg.AuthTimeout)
	if !ok {
		if timedOut {
			c.close(protocol.CloseAuthTimeout, "authentication timeout")
		}
		return nil
	}
	msg, err := protocol.Decode(frame)
	req, isAuth := msg.(*protocol.AuthRequest)
	if err != nil || !isAuth {
		r.authFail(c, protocol.CloseAuthFailed, "expected auth.request")
		return nil
	}
	// KiCI accepts any version at or above its minimum; a version newer
	// than this build speaks is refused too, since its messages may mean
	// what this build cannot honour.
	if req.ProtocolVersion < protocol.MinVersion || req.ProtocolVersion > protocol.Version {
		r.authFail(c, protocol.CloseProtocolError,
			fmt.Sprintf("unsupported protocol version %d (supported %d to %d)", req.ProtocolVersion, protocol.MinVersion, protocol.Version))
		return nil
	}
	tok, err := r.agentAuth.Validate(ctx, req.Token)
	if err != nil {
		if errors.Is(err, auth.ErrInvalidToken) {
			r.log.Warn("agent authentication failed", "err", err)
			r.authFail(c, protocol.CloseAuthFailed, "authentication failed: "+strings.TrimPrefix(err.Error(), auth.ErrInvalidToken.Error()+": "))
		} else {
			// A store failure is not the agent's fault: let it retry.
			r.log.Error("agent token lookup", "err", err)
			c.close(protocol.CloseInternalError, "authentication unavailable")
		}
		return nil
	}
	if !r.watchToken(ctx, c, tok) {
		return nil
	}
	if err := c.send(&protocol.AuthSuccess{Type: protocol.TypeAuthSuccess, ConnectionID: uuid.NewString()}); err != nil {
		return nil
	}

	frame, timedOut, ok = next(frames, readDone, r.cfg.RegisterTimeout)
	if !ok {
		if timedOut {
			c.close(protocol.CloseAuthTimeout, "registration timeout")
		}
		return nil
	}
	msg, err = protocol.Decode(frame)
	reg, isReg := msg.(*protocol.AgentRegister)
	if err != nil || !isReg {
		r.invalid(c, "expected agent.register")
		return nil
	}
	if !r.register(ctx, c, tok, reg) {
		return nil
	}
	return tok
}

// authFail sends auth.failure and closes with code.
func (r *registry) authFail(c *agentConn, code int, reason string) {
	_ = c.send(&protocol.AuthFailure{Type: protocol.TypeAuthFailure, Reason: reason})
	c.close(code, reason)
}

// invalid sends an INVALID_MESSAGE error frame and closes with 4003.
func (r *registry) invalid(c *agentConn, why string) {
	_ = c.send(&protocol.ErrorMessage{Type: protocol.TypeErrorMessage, Code: protocol.ErrorInvalidMessage, Message: why})
	c.close(protocol.CloseInvalidMessage, why)
}

// isPlatformLabel reports whether l is a self-reported platform label that
// a token's label scope does not restrict.
func isPlatformLabel(l string) bool {
	return strings.HasPrefix(l, "kici:os:") || strings.HasPrefix(l, "kici:arch:") || strings.HasPrefix(l, "kici:host:")
}

// validAgentID accepts 1–128 printable, non-blank ASCII characters.
func validAgentID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}
