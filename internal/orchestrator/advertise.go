package orchestrator

import (
	"net"

	"kici.dev/kici/internal/membership"
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
	return membership.ReachableURL(s.URL(), membership.InterfaceIPs())
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
