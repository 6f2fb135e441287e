package orchestrator

import (
	"net"
	"net/url"
)

// advertisedURL is this node's base URL as other nodes' agents reach it,
// the address recorded in the node registry: KICI_CLUSTER_ADDRESS when set,
// else the listener's URL. A listener on every interface (0.0.0.0 or ::)
// has no address anyone can dial, so its host is replaced by this host's
// first non-loopback unicast IP (IPv4 first), which is the right one on a
// single-homed host or a container on one network; a multi-homed node sets
// KICI_CLUSTER_ADDRESS.
func (s *Server) advertisedURL() string {
	if s.cfg.ClusterAddress != "" {
		return s.cfg.ClusterAddress
	}
	return reachableURL(s.URL(), interfaceIPs())
}

// reachableURL replaces an unspecified host in base (http://0.0.0.0:4000)
// with the first of ips that is not loopback, preferring IPv4; base is
// returned unchanged when its host is specific or no such IP exists.
func reachableURL(base string, ips []net.IP) string {
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

// interfaceIPs lists this host's interface addresses, nil when they cannot
// be read.
func interfaceIPs() []net.IP {
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

// listenNetwork is the network to listen on for KICI_HOST: "tcp4" for an
// IPv4 address, so KICI_HOST=0.0.0.0 means every IPv4 interface as written
// and not IPv6 too (Go's "tcp" on 0.0.0.0 is dual-stack, which a firewall
// covering IPv4 alone would leave open); "tcp" otherwise (:: is every
// interface of both families, a name resolves as usual).
func listenNetwork(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.To4() != nil {
		return "tcp4"
	}
	return "tcp"
}
