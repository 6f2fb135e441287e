package orchestrator

import (
	"net"
	"testing"
)

// A node listening on every interface registers an address its peers'
// agents can dial: this host's first non-loopback IP, IPv4 preferred; a
// specific listener address is kept as it is.
func TestReachableURLOfWildcardListener(t *testing.T) {
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("fe80::1"), net.ParseIP("fd00::5"), net.ParseIP("172.18.0.3")}
	for _, c := range []struct{ base, want string }{
		{"http://0.0.0.0:4000", "http://172.18.0.3:4000"},
		{"http://[::]:4000", "http://172.18.0.3:4000"},
		{"http://127.0.0.1:4000", "http://127.0.0.1:4000"},
		{"http://10.0.0.2:4000", "http://10.0.0.2:4000"},
	} {
		if got := reachableURL(c.base, ips); got != c.want {
			t.Errorf("reachableURL(%q) = %q, want %q", c.base, got, c.want)
		}
	}
	if got := reachableURL("http://0.0.0.0:4000", []net.IP{net.ParseIP("fd00::5")}); got != "http://[fd00::5]:4000" {
		t.Errorf("IPv6-only host: got %q", got)
	}
	if got := reachableURL("http://0.0.0.0:4000", []net.IP{net.ParseIP("127.0.0.1")}); got != "http://0.0.0.0:4000" {
		t.Errorf("loopback-only host: got %q, want the listener unchanged", got)
	}
}

// KICI_HOST=0.0.0.0 listens on IPv4 only, as written; :: and names keep
// Go's default.
func TestListenNetworkOfHost(t *testing.T) {
	for host, want := range map[string]string{"0.0.0.0": "tcp4", "127.0.0.1": "tcp4", "::": "tcp", "::1": "tcp", "localhost": "tcp"} {
		if got := listenNetwork(host); got != want {
			t.Errorf("listenNetwork(%q) = %q, want %q", host, got, want)
		}
	}
}
