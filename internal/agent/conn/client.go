// Package conn is the agent's WebSocket client for the orchestrator channel
// (see docs/kici-compatibility.md#agent-protocol): token handshake,
// registration, heartbeats, reconnection with backoff, and an ordered outbox
// that keeps every status across disconnects and replays it after
// re-registration.
package conn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"kici.dev/kici/internal/protocol"
)

// DefaultHeartbeatInterval is the connection heartbeat period (KiCI 30 s).
const DefaultHeartbeatInterval = 30 * time.Second

// DefaultHandshakeTimeout bounds dial + auth + registration.
const DefaultHandshakeTimeout = 20 * time.Second

// writeTimeout bounds one frame write.
const writeTimeout = 30 * time.Second

// ErrAuthFailed is returned by Run (wrapped with the reason) after
// auth.failure or a close with code 4010; the client does not reconnect.
var ErrAuthFailed = errors.New("orchestrator refused the agent credentials")

// errClosed ends a session after a requested graceful close.
var errClosed = errors.New("connection closed by the agent")

// Options configures a Client.
type Options struct {
	// URL is the orchestrator WebSocket URL (ws:// or wss://, path /ws).
	URL string
	// URLs, when set, are several orchestrators of one cluster, dialled
	// in turn: after a failed dial or a lost session the next one is
	// tried, so an agent fails over to any live node. URL is then unused.
	URLs []string
	// Token is the agent token; empty ⇒ no auth.request is sent.
	Token string
	// Register builds the agent.register frame for each (re)registration,
	// so InFlightJobs is current. Required.
	Register func() *protocol.AgentRegister
	// OnRegistered is called after each register.ack, before buffered
	// frames are replayed. May be nil.
	OnRegistered func(ack *protocol.RegisterAck)
	// OnMessage receives every decoded orchestrator frame after
	// registration (job.dispatch, job.cancel, …) on the reader goroutine;
	// it must not block for long.
	OnMessage func(msg any)
	// OnWritten is called with each outbox frame after it was written to
	// the socket. May be nil.
	OnWritten func(msg any)
	// OnDisconnected is called when a registered session ends. May be nil.
	OnDisconnected func(err error)
	// HeartbeatInterval defaults to DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// HandshakeTimeout defaults to DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxLogBytes bounds the log chunks held in memory
	// (DefaultMaxLogBytes); MaxSpillBytes bounds the spill file in SpillDir
	// (DefaultMaxSpillBytes; SpillDir defaults to the system temp dir).
	MaxLogBytes int64
	// MaxSpillBytes: see MaxLogBytes.
	MaxSpillBytes int64
	// SpillDir: see MaxLogBytes.
	SpillDir string
	// Backoff overrides BackoffDelay (tests). n is 0-based.
	Backoff func(n int) time.Duration
	// Logger receives connection events (discarded when nil).
	Logger *slog.Logger
}

// Client keeps one agent connection alive. Create it with New, start Run,
// and send frames with Send from any goroutine.
type Client struct {
	opts       Options
	urls       []string     // URLs, or URL alone
	cur        atomic.Int32 // index in urls of the node dialled now
	box        *outbox
	registered atomic.Bool
	closing    atomic.Bool
}

// New returns a Client; it does not connect until Run.
func New(opts Options) *Client {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.Backoff == nil {
		opts.Backoff = func(n int) time.Duration { return BackoffDelay(n, rand.Float64()) }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnMessage == nil {
		opts.OnMessage = func(any) {}
	}
	urls := opts.URLs
	if len(urls) == 0 {
		urls = []string{opts.URL}
	}
	return &Client{opts: opts, urls: urls, box: newOutbox(opts.MaxLogBytes, opts.MaxSpillBytes, opts.SpillDir, opts.Logger)}
}

// Send queues msg (a pointer to a protocol struct). Frames are written in
// Send order once registered; while disconnected they wait in the outbox,
// spilling to disk past its memory bound. Nothing is dropped: when the
// outbox is full a log chunk's Send blocks until the orchestrator takes
// (and, with LogAcks, acknowledges) earlier chunks, which slows the step
// that prints.
func (c *Client) Send(msg any) { c.box.push(msg) }

// URL is the orchestrator URL the client dials now (or last dialled).
func (c *Client) URL() string { return c.urls[int(c.cur.Load())%len(c.urls)] }

// rotate moves to the next orchestrator URL (a no-op with one URL).
func (c *Client) rotate() {
	if len(c.urls) > 1 {
		c.cur.Store(int32((int(c.cur.Load()) + 1) % len(c.urls)))
	}
}

// Registered reports whether the current session has been acknowledged.
func (c *Client) Registered() bool { return c.registered.Load() }

// Pending is the number of frames not yet written.
func (c *Client) Pending() int { return c.box.len() }

// Close asks Run to write every queued frame, close the socket with 1000 and
// return nil. If disconnected, Run first reconnects and re-registers; bound
// the wait by cancelling Run's context.
func (c *Client) Close() {
	c.closing.Store(true)
	c.box.wake()
}

// Run connects and keeps the connection alive until Close completes (nil),
// the credentials are refused (ErrAuthFailed) or ctx ends (ctx.Err()).
func (c *Client) Run(ctx context.Context) error {
	defer c.box.stop()
	attempt := 0
	for {
		registered, err := c.session(ctx)
		switch {
		case errors.Is(err, errClosed):
			return nil
		case errors.Is(err, ErrAuthFailed):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if registered {
			attempt = 0
		}
		// The next attempt goes to the next node: the one just lost may
		// be down for good (another node of the cluster serves the agent
		// and its jobs).
		from := c.URL()
		c.rotate()
		// Every node of a round is tried at the same delay; the delay grows
		// per round, as it grows per attempt with one node.
		delay := c.opts.Backoff(attempt / len(c.urls))
		attempt++
		c.opts.Logger.Warn("orchestrator connection lost; reconnecting", "err", err, "url", from, "next", c.URL(), "in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func authErr(err error) error {
	if websocket.CloseStatus(err) == protocol.CloseAuthFailed {
		return fmt.Errorf("%w (connection closed with %d)", ErrAuthFailed, protocol.CloseAuthFailed)
	}
	return err
}

// session runs one connection; registered reports whether it got an ack.
func (c *Client) session(ctx context.Context) (registered bool, err error) {
	hctx, hcancel := context.WithTimeout(ctx, c.opts.HandshakeTimeout)
	defer hcancel()
	ws, _, err := websocket.Dial(hctx, c.URL(), nil)
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	defer ws.CloseNow()

	write := func(ctx context.Context, msg any) error {
		return writeJSON(ctx, ws, msg)
	}
	if c.opts.Token != "" {
		if err := write(hctx, &protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: c.opts.Token, ProtocolVersion: protocol.Version}); err != nil {
			return false, authErr(err)
		}
		msg, err := readMsg(hctx, ws)
		if err != nil {
			return false, authErr(err)
		}
		switch m := msg.(type) {
		case *protocol.AuthSuccess:
		case *protocol.AuthFailure:
			ws.Close(websocket.StatusNormalClosure, "auth failed")
			return false, fmt.Errorf("%w: %s", ErrAuthFailed, m.Reason)
		default:
			return false, fmt.Errorf("expected auth.success, got %T", msg)
		}
	}
	reg := c.opts.Register()
	reg.Type = protocol.TypeAgentRegister
	reg.LogAcks = true
	if err := write(hctx, reg); err != nil {
		return false, authErr(err)
	}
	var ack *protocol.RegisterAck
	for ack == nil {
		msg, err := readMsg(hctx, ws)
		if err != nil {
			return false, authErr(err)
		}
		switch m := msg.(type) {
		case *protocol.RegisterAck:
			ack = m
		case *protocol.AuthFailure:
			ws.Close(websocket.StatusNormalClosure, "auth failed")
			return false, fmt.Errorf("%w: %s", ErrAuthFailed, m.Reason)
		case *protocol.ErrorMessage:
			return false, fmt.Errorf("registration refused: %s: %s", m.Code, m.Message)
		default:
			c.opts.Logger.Debug("ignoring frame before register.ack", "type", fmt.Sprintf("%T", msg))
		}
	}
	hcancel()
	c.registered.Store(true)
	defer c.registered.Store(false)
	c.box.registered(ack.LogAcks)
	defer c.box.disconnected()
	c.opts.Logger.Info("registered with orchestrator", "agentId", ack.AgentID, "pendingDispatch", ack.PendingDispatch, "queued", c.box.len())
	if c.opts.OnRegistered != nil {
		c.opts.OnRegistered(ack)
	}

	readErr := make(chan error, 1)
	go func() {
		for {
			msg, err := readMsg(ctx, ws)
			if err != nil {
				if errors.Is(err, protocol.ErrUnknownType) || errors.Is(err, errBadFrame) {
					c.opts.Logger.Warn("ignoring orchestrator frame", "err", err)
					continue
				}
				readErr <- err
				return
			}
			switch m := msg.(type) {
			case *protocol.AuthFailure:
				readErr <- fmt.Errorf("%w: %s", ErrAuthFailed, m.Reason)
				return
			case *protocol.ErrorMessage:
				c.opts.Logger.Warn("orchestrator error", "code", m.Code, "message", m.Message)
			case *protocol.Heartbeat:
			case *protocol.LogAck:
				c.box.ack(m)
			default:
				c.opts.OnMessage(msg)
			}
		}
	}()
	err = c.writeLoop(ctx, ws, readErr)
	if c.opts.OnDisconnected != nil && !errors.Is(err, errClosed) {
		c.opts.OnDisconnected(err)
	}
	return true, err
}

func (c *Client) writeLoop(ctx context.Context, ws *websocket.Conn, readErr <-chan error) error {
	hb := time.NewTicker(c.opts.HeartbeatInterval)
	defer hb.Stop()
	sendHeartbeat := func() error {
		if err := writeJSON(ctx, ws, &protocol.Heartbeat{Type: protocol.TypeHeartbeat, Timestamp: time.Now().UnixMilli()}); err != nil {
			return fmt.Errorf("write heartbeat: %w", err)
		}
		return nil
	}
	for {
		select {
		case err := <-readErr:
			return authErr(err)
		case <-ctx.Done():
			ws.Close(websocket.StatusGoingAway, "agent stopping")
			return ctx.Err()
		case <-hb.C:
			// Keep heartbeats flowing even while the outbox is busy.
			if err := sendHeartbeat(); err != nil {
				return err
			}
		default:
		}
		it, frame, err := c.box.next()
		if err != nil {
			c.opts.Logger.Error("dropping unencodable frame", "err", err)
			c.box.done(it, true)
			continue
		}
		if it != nil {
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err := ws.Write(wctx, websocket.MessageText, frame)
			cancel()
			c.box.done(it, err == nil)
			if err != nil {
				return fmt.Errorf("write: %w", err)
			}
			if c.opts.OnWritten != nil {
				c.opts.OnWritten(it.msg)
			}
			continue
		}
		if c.closing.Load() && c.box.len() == 0 {
			// Everything written and, with LogAcks, acknowledged.
			ws.Close(websocket.StatusNormalClosure, "agent shutdown")
			return errClosed
		}
		select {
		case <-c.box.notify:
		case <-hb.C:
			if err := sendHeartbeat(); err != nil {
				return err
			}
		case err := <-readErr:
			return authErr(err)
		case <-ctx.Done():
			ws.Close(websocket.StatusGoingAway, "agent stopping")
			return ctx.Err()
		}
	}
}

var errBadFrame = errors.New("malformed frame")

func readMsg(ctx context.Context, ws *websocket.Conn) (any, error) {
	typ, data, err := ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("%w: binary frame", errBadFrame)
	}
	msg, err := protocol.Decode(data)
	if err != nil && !errors.Is(err, protocol.ErrUnknownType) {
		return nil, fmt.Errorf("%w: %v", errBadFrame, err)
	}
	return msg, err
}

func writeJSON(ctx context.Context, ws *websocket.Conn, msg any) error {
	b, err := marshal(msg)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return ws.Write(wctx, websocket.MessageText, b)
}
