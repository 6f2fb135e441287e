package membership

import (
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// A node's registry address becomes the WebSocket URL its agents dial.
func TestWSURLOfNodeAddress(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4000":  "ws://127.0.0.1:4000/ws",
		"http://10.0.0.2:4000/":  "ws://10.0.0.2:4000/ws",
		"https://ci.example.com": "wss://ci.example.com/ws",
		"http://[::1]:4000":      "ws://[::1]:4000/ws",
	} {
		if got := WSURL(in); got != want {
			t.Errorf("WSURL(%q) = %q, want %q", in, got, want)
		}
	}
}

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
		if got := ReachableURL(c.base, ips); got != c.want {
			t.Errorf("ReachableURL(%q) = %q, want %q", c.base, got, c.want)
		}
	}
	if got := ReachableURL("http://0.0.0.0:4000", []net.IP{net.ParseIP("fd00::5")}); got != "http://[fd00::5]:4000" {
		t.Errorf("IPv6-only host: got %q", got)
	}
	if got := ReachableURL("http://0.0.0.0:4000", []net.IP{net.ParseIP("127.0.0.1")}); got != "http://0.0.0.0:4000" {
		t.Errorf("loopback-only host: got %q, want the listener unchanged", got)
	}
}

// Compression is allowed only while every other node that heartbeated in
// the last PlainOnlyHoldsFor reads compressed step-log chunks: a node of
// an older release that stopped beating for longer than liveness (a
// stall, a skewed clock) still holds it off; this node's own row and
// nodes gone for longer do not. The ones that hold it are named, and a
// registry that cannot be read allows nothing.
func TestCompressedLogsOnlyWhileEveryRecentNodeReadsThem(t *testing.T) {
	var every bool
	var named []string
	n := NewNode(NodeConfig{ID: "self", CompressedLogs: func(all bool, plainOnly []string) { every, named = all, plainOnly }})
	now := time.Now()
	self := &store.ClusterNode{ID: "self", HeartbeatAt: now}
	newer := &store.ClusterNode{ID: "b", ReadsCompressedLogs: true, HeartbeatAt: now}
	older := &store.ClusterNode{ID: "c", HeartbeatAt: now.Add(-time.Second)}
	stalled := &store.ClusterNode{ID: "d", HeartbeatAt: now.Add(-2 * NodeLiveFor)}
	gone := &store.ClusterNode{ID: "e", HeartbeatAt: now.Add(-PlainOnlyHoldsFor - time.Second)}
	for _, c := range []struct {
		nodes []*store.ClusterNode
		err   error
		every bool
		named []string
	}{
		{nil, nil, true, nil},
		{[]*store.ClusterNode{self, newer}, nil, true, nil},
		{[]*store.ClusterNode{self, newer, older}, nil, false, []string{"c"}},
		{[]*store.ClusterNode{self, newer, stalled}, nil, false, []string{"d"}},
		{[]*store.ClusterNode{self, newer, gone}, nil, true, nil},
		{[]*store.ClusterNode{newer}, errors.New("registry down"), false, nil},
	} {
		every, named = !c.every, []string{"stale"}
		n.tellCompressedLogs(c.nodes, now, c.err)
		if every != c.every || !slices.Equal(named, c.named) {
			t.Errorf("nodes %v (err %v): told %v %v, want %v %v", c.nodes, c.err, every, named, c.every, c.named)
		}
	}
}
