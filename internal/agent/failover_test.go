package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
)

// KICI_ORCHESTRATOR_URL lists several nodes: the agent dials them in turn,
// so with the first node down it registers with the second; when the
// second drops the connection it goes on to the next (the first, again),
// and back.
func TestAgentFailsOverAcrossOrchestratorURLs(t *testing.T) {
	a, b := agenttest.NewServer(t, agenttest.Options{}), agenttest.NewServer(t, agenttest.Options{})
	down := "ws://127.0.0.1:1/ws" // nothing listens on port 1
	cfg, err := LoadConfig([]string{
		"KICI_ORCHESTRATOR_URL=" + down + ", " + b.URL + "," + a.URL,
		"KICI_AGENT_ID=failover-agent",
		"KICI_WORK_DIR=" + t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.OrchestratorURLs) != 3 || cfg.OrchestratorURL != down {
		t.Fatalf("parsed URLs = %q (first %q)", cfg.OrchestratorURLs, cfg.OrchestratorURL)
	}
	ag := New(cfg, nil, Options{Backoff: func(int) time.Duration { return 20 * time.Millisecond }, HeartbeatInterval: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	b.WaitRegistrations(t, 1, 10*time.Second)
	b.Drop()
	a.WaitRegistrations(t, 1, 10*time.Second)
	if n := len(b.Registrations()); n != 1 {
		t.Fatalf("after node B dropped it the agent registered %d times with B, want once (it moves on to A)", n)
	}
}

// A list with one bad URL is refused, naming it.
func TestOrchestratorURLListRejectsABadEntry(t *testing.T) {
	_, err := LoadConfig([]string{"KICI_ORCHESTRATOR_URL=ws://a:1/ws,ftp://b/ws", "KICI_WORK_DIR=" + t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "ftp://b/ws") {
		t.Fatalf("error = %v, want one naming ftp://b/ws", err)
	}
}
