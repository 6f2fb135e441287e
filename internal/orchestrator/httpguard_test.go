package orchestrator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
	"kici.dev/kici/internal/webhook"
)

// TestSlowWebhookBodiesAreCut attacks a running orchestrator the way a
// slow-body flood does: 1,000 connections to a real generic source's
// webhook, each with complete headers and a 1-byte body. Every one is
// closed within the body grace plus a margin, the heap stays bounded while
// they are open, and a delivery from another address is accepted during
// the attack.
func TestSlowWebhookBodiesAreCut(t *testing.T) {
	const attackers = 1000
	cfg, err := config.Load([]string{"KICI_DATA_DIR=" + t.TempDir(), "KICI_PORT=0", "KICI_AGENT_BINARY=/bin/true",
		"KICI_REQUEST_BODY_GRACE_MS=1000"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	src := &store.Source{ID: "src-slow", OrgID: "acme", Name: "hook", Provider: provider.Generic, RoutingKey: "generic:acme:src-slow",
		VerificationMethod: webhook.VerifyBearerToken, WebhookSecret: "s3cret-token", Enabled: true, CreatedAt: time.Now().UTC()}
	if err := s.store.CreateSource(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	addr := strings.TrimPrefix(s.URL(), "http://")
	waitHealthy(t, s.URL())

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	start := time.Now()
	conns := make([]net.Conn, attackers)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /webhook/acme/generic/hook HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token\r\n"+
			"X-Event-Type: push\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
		conns[i] = c
	}
	during := heap()

	// A real delivery from another address is accepted meanwhile.
	legit := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequest("POST", s.URL()+"/webhook/acme/generic/hook", strings.NewReader(`{"ref":"refs/heads/main"}`))
	req.Header.Set("Authorization", "Bearer s3cret-token")
	req.Header.Set("X-Event-Type", "push")
	req.Header.Set("X-Kici-Delivery", "legit-1")
	resp, err := legit.Do(req)
	if err != nil {
		t.Fatalf("legitimate delivery during the attack: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("legitimate delivery during the attack: %d %s", resp.StatusCode, b)
	}

	var open atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(6 * time.Second))
			_, err := io.Copy(io.Discard, bufio.NewReader(c))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				open.Add(1)
			}
		}(c)
	}
	wg.Wait()
	if n := open.Load(); n > 0 {
		t.Fatalf("%d of %d slow-body connections were still open 6 s after the 1 s grace", n, attackers)
	}
	growth := int64(during) - int64(before)
	t.Logf("%d slow-body connections closed within %v; heap in use %d MiB before, %d MiB with them open",
		attackers, time.Since(start).Round(time.Millisecond), before>>20, during>>20)
	if growth > 64<<20 {
		t.Fatalf("heap grew by %d MiB with %d slow connections open", growth>>20, attackers)
	}
}

// waitHealthy polls GET /health until the server answers.
func waitHealthy(t *testing.T, base string) {
	t.Helper()
	wait.For(t, 10*time.Second, "the orchestrator to answer /health", func() bool {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}
