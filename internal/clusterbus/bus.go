// Package clusterbus carries messages between the orchestrators of one
// PostgreSQL database: wake-ups (a job enqueued on one node, dispatched by
// another to its idle agent) and requests (cancel a job whose agent is
// connected to another node). It is PostgreSQL LISTEN/NOTIFY on one
// channel, kici_cluster; a message is JSON {"k": kind, "f": sending node,
// "b": body}. Delivery is at most once and only to nodes listening at the
// time: every use has a fallback (the dispatcher's periodic queue resync,
// the cancel's bounded wait) for a message that is lost.
package clusterbus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kici.dev/kici/internal/pglisten"
	"kici.dev/kici/internal/pgpool"
)

// Channel is the LISTEN/NOTIFY channel of the bus.
const Channel = "kici_cluster"

// MaxBody bounds a message body: NOTIFY payloads must stay under 8000
// bytes.
const MaxBody = 7000

// Message is one bus message.
type Message struct {
	// Kind names the message ("job.enqueued", "job.cancel", …).
	Kind string `json:"k"`
	// From is the id of the node that sent it.
	From string `json:"f"`
	// Body is the kind's payload (often JSON).
	Body string `json:"b"`
}

// Bus is one node's end of the bus. Create it with Open; Close it at
// shutdown.
type Bus struct {
	pool *pgxpool.Pool
	node string
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string]func(Message)

	cancel context.CancelFunc
	done   chan struct{}
}

// Open connects to the database at url as node and starts listening.
// Errors: an unparsable URL or an unreachable database.
func Open(ctx context.Context, url, node string, logger *slog.Logger) (*Bus, error) {
	pool, err := pgpool.Open(ctx, url, 3) // one listens, the others publish
	if err != nil {
		return nil, fmt.Errorf("clusterbus: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lctx, cancel := context.WithCancel(context.Background())
	b := &Bus{pool: pool, node: node, log: logger, handlers: map[string]func(Message){}, cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	go b.listen(lctx, ready)
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		logger.Warn("cluster bus: not listening yet; messages until then are missed")
	}
	return b, nil
}

// Node is the id this end sends as.
func (b *Bus) Node() string { return b.node }

// Handle registers fn for messages of kind sent by other nodes (a node
// never receives its own). fn runs on its own goroutine per message.
func (b *Bus) Handle(kind string, fn func(Message)) {
	b.mu.Lock()
	b.handlers[kind] = fn
	b.mu.Unlock()
}

// Publish sends a message of kind to every other node. Errors: a body
// over MaxBody, a database failure.
func (b *Bus) Publish(ctx context.Context, kind, body string) error {
	if len(body) > MaxBody {
		return fmt.Errorf("clusterbus: %s body of %d bytes exceeds %d", kind, len(body), MaxBody)
	}
	raw, err := json.Marshal(Message{Kind: kind, From: b.node, Body: body})
	if err != nil {
		return err
	}
	if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, string(raw)); err != nil {
		return fmt.Errorf("clusterbus: publish %s: %w", kind, err)
	}
	return nil
}

// Close stops listening and closes the connections.
func (b *Bus) Close() {
	b.cancel()
	<-b.done
	b.pool.Close()
}

func (b *Bus) listen(ctx context.Context, ready chan struct{}) {
	defer close(b.done)
	var once sync.Once
	pglisten.Run(ctx, b.pool, Channel, b.log, func() { once.Do(func() { close(ready) }) }, b.dispatch)
}

// dispatch hands a message of another node to its kind's handler.
func (b *Bus) dispatch(payload string) {
	var m Message
	if json.Unmarshal([]byte(payload), &m) != nil || m.From == b.node {
		return
	}
	b.mu.Lock()
	fn := b.handlers[m.Kind]
	b.mu.Unlock()
	if fn != nil {
		go fn(m)
	}
}
