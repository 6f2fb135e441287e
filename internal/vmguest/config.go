// Package vmguest is the init (PID 1) of kici's job VMs: it mounts the
// kernel's file systems, loads the network driver, configures the
// interface for QEMU's user network, reads the boot configuration the
// scaler put in the initramfs (and deletes it before any job code runs),
// relays the host ports the scaler allows, runs kici-agent, and powers
// the VM off when the agent ends (docs/scaling.md, "QEMU microVMs").
package vmguest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"kici.dev/kici/internal/boundedre"
)

// ConfigPath is where the scaler's per-VM initramfs segment puts the boot
// configuration in the guest. The init reads and removes it first thing:
// it holds the agent's one-session token.
const ConfigPath = "/kici/boot.json"

// ProbeArg on the kernel command line makes the init print ProbeOK on the
// console and power off at once: the scaler's boot probe (is KVM usable
// here, and how long does a boot take).
const (
	ProbeArg = "kici.probe=1"
	ProbeOK  = "kici-vm-init: probe ok"
)

// Guest network of QEMU's user networking (slirp): the guest's address,
// the gateway, and the virtual address whose ports the scaler forwards to
// the host (guestfwd).
const (
	GuestAddr    = "10.0.2.15/24"
	GatewayAddr  = "10.0.2.2"
	ForwardAddr  = "10.0.2.100"
	GuestIfName  = "eth0"
	agentBinary  = "/bin/kici-agent"
	modulesOrder = "/kici/modules.order"
)

// Config is the boot configuration of one VM (ConfigPath, JSON).
type Config struct {
	// Env is the agent's environment, KEY=VALUE (the scaler's agentVars:
	// orchestrator URL, agent id, its one-session token, labels).
	Env []string `json:"env"`
	// Forwards are the host TCP ports the guest may reach, as host:port
	// with host 127.0.0.1: the init listens on the same address inside
	// the guest and relays each connection to ForwardAddr:port, which
	// QEMU forwards to the host. Nothing else of the host is reachable.
	Forwards []string `json:"forwards"`
	// Hosts are host names the guest resolves to 127.0.0.1 (the
	// orchestrator URL's host: the guest reaches it through its relay).
	Hosts []string `json:"hosts,omitempty"`
	// Hostname is the guest's host name (the agent id).
	Hostname string `json:"hostname,omitempty"`
	// Address and Gateway configure eth0 on a bridge network (a qemu
	// scaler with network: tap): Address is the guest's IPv4 address with
	// its prefix length (10.0.0.2/24), Gateway the bridge's address, the
	// default route. Empty: QEMU's user network (GuestAddr, no route).
	Address string `json:"address,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// ParseConfig decodes and checks a boot configuration.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("boot configuration: %w", err)
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("boot configuration: env entry %q is not KEY=VALUE", kv)
		}
	}
	for _, h := range c.Hosts {
		if !hostName.MatchString(h) {
			return nil, fmt.Errorf("boot configuration: host name %q", h)
		}
	}
	for _, f := range c.Forwards {
		if _, err := ForwardPort(f); err != nil {
			return nil, err
		}
	}
	if c.Address != "" || c.Gateway != "" {
		p, err := netip.ParsePrefix(c.Address)
		gw, gerr := netip.ParseAddr(c.Gateway)
		if err != nil || !p.Addr().Is4() || gerr != nil || !p.Contains(gw) {
			return nil, fmt.Errorf("boot configuration: address %q and gateway %q: want an IPv4 address/prefix and a gateway inside it", c.Address, c.Gateway)
		}
	}
	return &c, nil
}

var hostName = boundedre.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$`, 1, 253)

// ForwardPort checks a forward (127.0.0.1:port) and returns its port.
func ForwardPort(f string) (int, error) {
	host, p, err := net.SplitHostPort(f)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || host != "127.0.0.1" || port < 1 || port > 65535 {
		return 0, fmt.Errorf("forward %q: want 127.0.0.1:<port>", f)
	}
	return port, nil
}
