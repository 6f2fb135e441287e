package membership

import (
	"errors"
	"net"
	"slices"
	"testing"

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

// Compression is allowed only while every other live node reads
// compressed step-log chunks; the ones that do not are named, and a
// registry that cannot be read allows nothing.
func TestCompressedLogsOnlyWhileEveryLiveNodeReadsThem(t *testing.T) {
	var every bool
	var named []string
	n := NewNode(NodeConfig{ID: "self", CompressedLogs: func(all bool, plainOnly []string) { every, named = all, plainOnly }})
	newer := &store.ClusterNode{ID: "b", ReadsCompressedLogs: true}
	older := &store.ClusterNode{ID: "c"}
	for _, c := range []struct {
		others []*store.ClusterNode
		err    error
		every  bool
		named  []string
	}{
		{nil, nil, true, nil},
		{[]*store.ClusterNode{newer}, nil, true, nil},
		{[]*store.ClusterNode{newer, older}, nil, false, []string{"c"}},
		{[]*store.ClusterNode{newer}, errors.New("registry down"), false, nil},
	} {
		every, named = !c.every, []string{"stale"}
		n.tellCompressedLogs(c.others, c.err)
		if every != c.every || !slices.Equal(named, c.named) {
			t.Errorf("others %v (err %v): told %v %v, want %v %v", c.others, c.err, every, named, c.every, c.named)
		}
	}
}
