package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// Loopback, link-local, unspecified and this host's own addresses are
// local; public and private-network addresses are not.
func TestLocalAddresses(t *testing.T) {
	g := &Guard{interfaceAddrs: func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("192.0.2.10"), Mask: net.CIDRMask(24, 32)}}, nil
	}}
	for addr, local := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "169.254.169.254": true, "fe80::1": true,
		"0.0.0.0": true, "::": true, "::ffff:127.0.0.1": true, "192.0.2.10": true,
		"10.1.2.3": false, "192.168.1.1": false, "140.82.112.3": false, "192.0.2.11": false,
	} {
		if got := g.Local(netip.MustParseAddr(addr)) != ""; got != local {
			t.Errorf("Local(%s) = %v, want %v", addr, got, local)
		}
	}
	// A name is judged by what it resolves to.
	g.lookup = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("127.0.0.1")}, nil
	}
	if err := g.CheckURL(context.Background(), "apiBaseUrl", "https://forge.internal/api"); !errors.Is(err, ErrLocalAddress) {
		t.Fatalf("a name with a loopback address: %v", err)
	}
	g.AllowLocal = true
	if err := g.CheckURL(context.Background(), "apiBaseUrl", "https://forge.internal/api"); err != nil {
		t.Fatalf("allowed: %v", err)
	}
}

// The attack past creation: the forge client is sent to a local address
// (a name re-resolved to 127.0.0.1, or a redirect). The guarded client
// refuses the connection, the server never sees a request, and with
// AllowLocal the same request goes through.
func TestGuardedClientRefusesLocalConnections(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL, http.StatusFound)
	}))
	defer redirect.Close()

	c := (&Guard{}).HTTPClient(5 * time.Second)
	if _, err := c.Get(srv.URL); !errors.Is(err, ErrLocalAddress) {
		t.Fatalf("GET %s: %v, want ErrLocalAddress", srv.URL, err)
	}
	if hits != 0 {
		t.Fatal("the local server was reached")
	}
	resp, err := (&Guard{AllowLocal: true}).HTTPClient(5 * time.Second).Get(redirect.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits != 1 {
		t.Fatalf("allowed client: %d hits", hits)
	}
}
