package membership

import (
	"net"
	"net/url"
)

// A node registers the base URL other nodes' agents dial (its address in
// the registry, NodeConfig.Address); a listener on every interface has none,
// so the host's own addresses stand in.

// ReachableURL replaces an unspecified host in base (http://0.0.0.0:4000)
// with the first of ips that is not loopback, preferring IPv4; base is
// returned unchanged when its host is specific or no such IP exists.
func ReachableURL(base string, ips []net.IP) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsUnspecified() {
		return base
	}
	var pick net.IP
	for _, ip := range ips {
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() {
			continue
		}
		if ip.To4() != nil {
			pick = ip
			break
		}
		if pick == nil {
			pick = ip
		}
	}
	if pick == nil {
		return base
	}
	u.Host = net.JoinHostPort(pick.String(), u.Port())
	return u.String()
}

// InterfaceIPs lists this host's interface addresses, nil when they cannot
// be read.
func InterfaceIPs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}
