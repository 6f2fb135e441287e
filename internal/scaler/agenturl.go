package scaler

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// agentURL returns the orchestrator URL an agent should dial. An
// orchestrator bound to every interface (KICI_HOST=0.0.0.0 or ::) derives
// ws://[::]:port/ws or ws://0.0.0.0:port/ws from its listener, which no
// agent can connect to; such a host is replaced by reach, the address under
// which this backend's agents see the orchestrator: 127.0.0.1 for processes
// on this host, the agent bridge network's gateway for containers.
//
// raw may be a comma-separated list (the nodes of a cluster): each URL is
// treated alike.
func agentURL(raw, reach string) string {
	if strings.Contains(raw, ",") {
		parts := strings.Split(raw, ",")
		for i, p := range parts {
			parts[i] = agentURL(strings.TrimSpace(p), reach)
		}
		return strings.Join(parts, ",")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		u.Host = net.JoinHostPort(reach, u.Port())
	}
	return u.String()
}

// CheckContainerReach refuses a container scaler whose agents would dial a
// loopback address: inside a container that is the container itself, so
// every job would wait for an agent that never connects. The remedy is
// KICI_HOST=0.0.0.0 (agents then dial the bridge gateway), KICI_HOST set to
// the gateway, or the entry's orchestratorUrl.
func (m *Manager) CheckContainerReach() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sc := range m.scalers {
		e := sc.entry
		if e.Type != TypeContainer || sc.retiring {
			continue
		}
		raw := e.OrchestratorURL
		if raw == "" {
			raw, _, _ = strings.Cut(m.opts.OrchestratorURL, ",") // this node's own URL comes first
		}
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("container scaler %s: orchestrator URL %q: %w", e.Name, raw, err)
		}
		host := u.Hostname()
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
			return fmt.Errorf("container scaler %s: its agents would dial %s, which inside a container is the container itself; "+
				"set KICI_HOST=0.0.0.0 (agents then dial the %s gateway %s) or KICI_HOST=%s, or orchestratorUrl for the scaler",
				e.Name, raw, AgentNetwork, AgentNetworkGateway, AgentNetworkGateway)
		}
	}
	return nil
}
