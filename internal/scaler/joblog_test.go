package scaler

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/testutil/wait"
)

// A job's provisioning log and pending reason are read by anyone who can
// read the run (a fork author included): with the real bare-metal backend,
// neither a started agent nor a failed spawn puts a host path of the
// orchestrator's machine there, while the orchestrator's own log keeps
// them.
func TestProvisioningLogWithholdsHostDetails(t *testing.T) {
	host := t.TempDir()
	bin := filepath.Join(host, "bin", "kici-agent")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(host, "agents")
	_ = os.MkdirAll(logDir, 0o755)
	cfg, err := scalerconfig.Parse("test.yaml", []byte(`version: 1
scalers:
  - name: host
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [linux]
      - labels: [broken]
        binaryPath: `+filepath.Join(host, "missing", "kici-agent")+`
`))
	if err != nil {
		t.Fatal(err)
	}
	// The orchestrator's log goes to a file (written by several
	// goroutines, read once the lines are in).
	orchLog, err := os.Create(filepath.Join(t.TempDir(), "orchestrator.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer orchLog.Close()
	logger := slog.New(slog.NewTextHandler(orchLog, nil))
	jobLog := &memLog{lines: map[string][]string{}}
	m, err := NewManager(cfg, Options{Tokens: &fakeTokens{ttls: map[string]time.Duration{}}, Settings: StaticSettings{TokenTTL: time.Hour, SpawnTimeout: 10 * time.Second},
		OrchestratorURL: "ws://127.0.0.1:1/ws", Events: jobLog, FailureBackoff: time.Minute, Logger: logger,
		Backends: func(e *Entry, exited func(string, error)) (Backend, error) {
			return NewBareMetal(BareMetalOptions{AgentBinary: bin, WorkDir: host, LogDir: logDir, Logger: logger}, exited), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Shutdown(ctx)
	})

	ctx := context.Background()
	if _, err := m.SpawnFor(ctx, dispatch.ScaleRequest{JobID: "j1", RunID: "r1", RunsOn: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SpawnFor(ctx, dispatch.ScaleRequest{JobID: "j2", RunID: "r1", RunsOn: []string{"broken"}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "j1 ready", func() bool { return strings.Contains(jobLog.text("j1"), "[scaler.ready]") })
	wait.For(t, 5*time.Second, "j2 failed", func() bool { return strings.Contains(jobLog.text("j2"), "[scaler.failed]") })

	started, failed := jobLog.text("j1"), jobLog.text("j2")
	if !strings.Contains(started, "started as a process on the orchestrator's host") {
		t.Errorf("j1's provisioning log does not say how the agent started:\n%s", started)
	}
	if !strings.Contains(failed, "<host path>") {
		t.Errorf("j2's provisioning log does not say a host path was withheld:\n%s", failed)
	}
	_, err = m.SpawnFor(ctx, dispatch.ScaleRequest{JobID: "j2", RunID: "r1", RunsOn: []string{"broken"}})
	if err == nil {
		t.Fatal("a job whose spawn failed was spawned again inside its backoff")
	}
	for what, text := range map[string]string{"j1's provisioning log": started, "j2's provisioning log": failed, "j2's pending reason": err.Error()} {
		if strings.Contains(text, host) {
			t.Errorf("%s names the host path %s:\n%s", what, host, text)
		}
	}
	b, _ := os.ReadFile(orchLog.Name())
	orch := string(b)
	if !strings.Contains(orch, filepath.Join(logDir, "")) || !strings.Contains(orch, filepath.Join(host, "missing", "kici-agent")) {
		t.Errorf("the orchestrator's log lost the host details:\n%s", orch)
	}
}

func TestWithholdHostDetails(t *testing.T) {
	cases := []struct{ in, want string }{
		{"start /opt/kici/bin/kici-agent: fork/exec /opt/kici/bin/kici-agent: no such file or directory",
			"start <host path>: fork/exec <host path>: no such file or directory"},
		{"agent container created from registry.example.com/team/agent:1", "agent container created from registry.example.com/team/agent:1"},
		{"dial tcp 10.1.2.3:2375: connection refused", "dial tcp <host address>: connection refused"},
		{"connecting to ws://127.0.0.1:4000/ws", "connecting to ws://<host address>/ws"},
		{"agent ag-1 started in 1.25s", "agent ag-1 started in 1.25s"},
		{"open (/var/lib/kici/x.log)", "open (<host path>)"},
	}
	for _, c := range cases {
		if got, _ := withholdHostDetails(c.in); got != c.want {
			t.Errorf("withholdHostDetails(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
