// Package netguard keeps the orchestrator from sending a source's
// credentials to itself or its host: a forge URL (a GitHub source's
// apiBaseUrl, a universal-git source's apiBaseUrl and http(s) clone URL)
// whose host resolves to a loopback, link-local (169.254.0.0/16, the
// cloud metadata address 169.254.169.254 included; fe80::/10) or
// unspecified address, or to an address of one of this host's network
// interfaces, is refused unless the operator allows local forges
// (KICI_ALLOW_LOCAL_SOURCE_URLS=true; a forge running on the
// orchestrator's own host, or a test's fake). Private networks
// (10.0.0.0/8 and the like) stay allowed: self-hosted forges live there.
//
// The check runs when a source is created or changed, and again on every
// connection the forge clients open (Control), so a name that resolves
// elsewhere at creation and to 127.0.0.1 later (DNS rebinding) or a
// redirect to a local address is refused too.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// EnvAllowLocal is the orchestrator setting that lets forge URLs reach
// local addresses.
const EnvAllowLocal = "KICI_ALLOW_LOCAL_SOURCE_URLS"

// lookupTimeout bounds the name lookup of CheckURL.
const lookupTimeout = 5 * time.Second

// ErrLocalAddress marks a refused URL or connection.
var ErrLocalAddress = errors.New("forge URL reaches this host")

// Guard decides which addresses forge URLs may reach. The zero value
// refuses local ones.
type Guard struct {
	// AllowLocal lets every address through (EnvAllowLocal=true).
	AllowLocal bool
	// interfaceAddrs lists this host's addresses (tests override it).
	interfaceAddrs func() ([]net.Addr, error)
	// lookup resolves a host name (tests override it).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Local reports why addr is a local address ("" when it is not):
// loopback, link-local, unspecified, or an address of this host.
func (g *Guard) Local(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast():
		return "a link-local address (cloud metadata services live there)"
	case addr.IsUnspecified():
		return "the unspecified address (this host)"
	}
	ifaddrs := net.InterfaceAddrs
	if g.interfaceAddrs != nil {
		ifaddrs = g.interfaceAddrs
	}
	as, _ := ifaddrs()
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
				return "an address of the orchestrator's own host"
			}
		}
	}
	return ""
}

// CheckURL resolves the host of raw (an http(s) URL) and returns an error
// matching ErrLocalAddress, naming the setting that allows it, when any of
// its addresses is local; nil when allowed, and for a host that does not
// resolve (the connection will fail on its own, and be checked then).
// field names the setting in the message, e.g. "apiBaseUrl".
func (g *Guard) CheckURL(ctx context.Context, field, raw string) error {
	if g == nil || g.AllowLocal {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil // the caller's own syntax check reports it
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if g.lookup != nil {
		addrs, _ = g.lookup(ctx, host)
	} else {
		ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		addrs, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		cancel()
	}
	for _, a := range addrs {
		if why := g.Local(a); why != "" {
			return fmt.Errorf("%w: %s %q resolves to %s, %s; a forge there would receive the source's credentials. "+
				"Set %s=true on the orchestrator if the forge really runs on this host", ErrLocalAddress, field, raw, a, why, EnvAllowLocal)
		}
	}
	return nil
}

// Control is a net.Dialer Control function that refuses connections to
// local addresses (see Local) unless AllowLocal; install it on the dialer
// of every forge client.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	if g == nil || g.AllowLocal {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil
	}
	if why := g.Local(ap.Addr()); why != "" {
		return fmt.Errorf("%w: connection to %s refused, %s (set %s=true to allow forges on this host)", ErrLocalAddress, address, why, EnvAllowLocal)
	}
	return nil
}

// HTTPClient returns an HTTP client for forge APIs whose connections pass
// Control (so redirects and re-resolved names are checked too), with the
// default transport's proxy, TLS and pooling settings and timeout as its
// overall request limit.
func (g *Guard) HTTPClient(timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.Control}
	t.DialContext = d.DialContext
	return &http.Client{Timeout: timeout, Transport: t}
}
