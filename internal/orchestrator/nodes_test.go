package orchestrator

import "testing"

// KICI_HOST=0.0.0.0 listens on IPv4 only, as written; :: and names keep
// Go's default.
func TestListenNetworkOfHost(t *testing.T) {
	for host, want := range map[string]string{"0.0.0.0": "tcp4", "127.0.0.1": "tcp4", "::": "tcp", "::1": "tcp", "localhost": "tcp"} {
		if got := listenNetwork(host); got != want {
			t.Errorf("listenNetwork(%q) = %q, want %q", host, got, want)
		}
	}
}
