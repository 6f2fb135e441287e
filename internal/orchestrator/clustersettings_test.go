package orchestrator

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/testutil/wait"
)

// The environment sets the defaults of the live knobs it names:
// KICI_QUEUE_TIMEOUT_MS → queueTimeoutMs, KICI_WEBHOOK_DEDUP_TTL_MS →
// webhookDedupTtlMs, KICI_DISPATCH_ACK_TIMEOUT_MS → dispatchAckTimeoutMs, as
// served by GET /api/v1/admin/cluster-settings.
func TestClusterSettingDefaultsFromEnvironment(t *testing.T) {
	t.Setenv("KICI_QUEUE_TIMEOUT_MS", "120000")
	dir := t.TempDir()
	cfg, err := config.Load([]string{"KICI_DATA_DIR=" + dir, "KICI_PORT=0", "KICI_AGENT_BINARY=/bin/true",
		"KICI_WEBHOOK_DEDUP_TTL_MS=5000", "KICI_DISPATCH_ACK_TIMEOUT_MS=2500"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	tok, err := os.ReadFile(filepath.Join(dir, config.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/api/v1/admin/cluster-settings", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	var resp *http.Response
	wait.Until(10*time.Second, func() bool {
		resp, err = http.DefaultClient.Do(req)
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Defaults  map[string]int64 `json:"defaults"`
		Effective map[string]int64 `json:"effective"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	for k, want := range map[string]int64{"queueTimeoutMs": 120000, "webhookDedupTtlMs": 5000, "dispatchAckTimeoutMs": 2500} {
		if v.Defaults[k] != want || v.Effective[k] != want {
			t.Errorf("%s: default %d effective %d, want %d", k, v.Defaults[k], v.Effective[k], want)
		}
	}
}
