package dispatch

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// agentConn is one agent socket. Fields below mu-comment are guarded by
// registry.mu.
type agentConn struct {
	ws        *websocket.Conn
	closeOnce sync.Once
	closeDone chan struct{} // closed when the close handshake ended
	sendMu    sync.Mutex    // orders frames (register.ack before any dispatch)

	// guarded by registry.mu
	id            string
	tokenID       string
	labels        []string
	mandatory     []string // the token's mandatory labels (kick.go)
	tokenLabels   []string // the token's label scope; nil = unscoped
	ephemeral     bool
	scalerManaged bool
	maxConc       int
	active        int // slots in use (reserved or running)
	served        int // jobs ever handed to this socket
	version       string
	hostname      string
	connectedAt   time.Time
	lastSeen      time.Time
	violations    []time.Time
	closing       bool
	ready         bool   // register.ack sent: may receive dispatches
	evicted       bool   // unregistered by an ack timeout
	replaced      bool   // superseded by a newer socket of the same agent
	resume        string // this socket's session resume token (session.go)
	// resumed: this socket presented the resume token of a session that
	// this process or the cluster knew, so it is the agent that ran that
	// session's jobs; a socket that registered its id afresh is not.
	resumed bool
	// statusAcks: the agent negotiated job.status.ack (set at
	// registration, read by the message loop).
	statusAcks bool

	logs     *logBatch // log lines read, not yet written (logs.go); message loop only
	logWrite *logWrite // the batch being written meanwhile (logs.go); message loop only
	logHint  int       // lines per step in the last batch handed to a write, to size the next (logs.go); message loop only
	// logFailed: a log write failed; the connection is closing and stores
	// no later line (logs.go). Message loop only.
	logFailed bool
}

// send writes one JSON message (10 s write timeout).
func (a *agentConn) send(msg any) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	return a.sendLocked(msg)
}

// sendLocked is send for a caller holding sendMu.
func (a *agentConn) sendLocked(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.ws.Write(ctx, websocket.MessageText, b)
}

// close closes the socket once with code and reason (truncated to 123
// bytes), without blocking the caller on the close handshake.
func (a *agentConn) close(code int, reason string) {
	a.closeOnce.Do(func() {
		go func() {
			_ = a.ws.Close(websocket.StatusCode(code), truncateReason(reason))
			close(a.closeDone)
		}()
	})
}

// truncateReason cuts a close reason to at most 123 bytes (RFC 6455 control
// frame limit) without splitting a UTF-8 character.
func truncateReason(s string) string {
	const max = 123
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
