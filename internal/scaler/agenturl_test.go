package scaler

import (
	"strings"
	"testing"

	"kici.dev/kici/internal/scaler/scalerconfig"
)

func TestAgentURLReplacesUnspecifiedHost(t *testing.T) {
	for in, want := range map[string]string{
		"ws://[::]:4000/ws":       "ws://172.30.0.1:4000/ws",
		"ws://0.0.0.0:4000/ws":    "ws://172.30.0.1:4000/ws",
		"ws://172.30.0.1:4000/ws": "ws://172.30.0.1:4000/ws",
		"wss://ci.example.com/ws": "wss://ci.example.com/ws",
		"ws://127.0.0.1:4000/ws":  "ws://127.0.0.1:4000/ws",
		"ws://[fe80::1]:4000/ws":  "ws://[fe80::1]:4000/ws",
		"ws://[::]:4000/ws?x=1#f": "ws://172.30.0.1:4000/ws?x=1#f",
		// The nodes of a cluster, this node's first: each one alike.
		"ws://0.0.0.0:4000/ws,ws://10.0.0.2:4000/ws": "ws://172.30.0.1:4000/ws,ws://10.0.0.2:4000/ws",
	} {
		if got := agentURL(in, AgentNetworkGateway); got != want {
			t.Errorf("agentURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := agentURL("ws://[::]:4000/ws", "127.0.0.1"); got != "ws://127.0.0.1:4000/ws" {
		t.Errorf("bare metal: %q", got)
	}
}

// TestContainerScalerOnLoopbackRefused: a container scaler whose agents
// would dial the orchestrator's loopback address is refused at start with
// the remedy; an unspecified or gateway address is accepted.
func TestContainerScalerOnLoopbackRefused(t *testing.T) {
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte("version: 1\nscalers:\n  - name: pool\n    type: container\n    maxAgents: 1\n    labelSets:\n      - labels: [ctr]\n        image: x:latest\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{}
	for _, e := range cfg.Scalers {
		m.scalers = append(m.scalers, &scalerState{entry: e})
	}
	for url, ok := range map[string]bool{"ws://127.0.0.1:4000/ws": false, "ws://localhost:4000/ws": false,
		"ws://[::]:4000/ws": true, "ws://172.30.0.1:4000/ws": true} {
		m.opts.OrchestratorURL = url
		err := m.CheckContainerReach()
		if ok != (err == nil) {
			t.Errorf("%s: %v", url, err)
		}
		if err != nil && !strings.Contains(err.Error(), "KICI_HOST=0.0.0.0") {
			t.Errorf("%s: error lacks the remedy: %v", url, err)
		}
	}
}
