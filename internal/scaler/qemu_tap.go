package scaler

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/vmguest"
)

// tapBootConfig attaches VM v to the bridge network (a qemu scaler with
// network: tap) the way the Firecracker backend attaches its microVMs:
// the first free address of the subnet, a TAP kici-<8 hex> owned by the
// user QEMU runs as, enslaved to the bridge as an isolated port and tagged
// kici-fc:<scaler>:<agent>, and one vms_in rule per reachable port (the
// orchestrator's and hostPorts, on the gateway address). It returns the
// guest's boot configuration: that address, the gateway as its default
// route, and the agent dialling the orchestrator at the gateway. What it
// created is recorded in v for teardownTap, also on failure.
func (q *QEMU) tapBootConfig(ctx context.Context, req *SpawnRequest, v *qemuVM) (*vmguest.Config, error) {
	u, err := url.Parse(req.OrchestratorURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("orchestrator URL %q: want ws://host:port", req.OrchestratorURL)
	}
	port, err := orchestratorPort(req.OrchestratorURL)
	if err != nil {
		return nil, err
	}
	h := q.host
	ip, err := h.alloc.Allocate(v.id)
	if err != nil {
		return nil, err
	}
	v.ip, v.tap, v.tag = ip, tapName(v.id), vmTag(q.name, v.id)
	gw := h.net.GatewayAddr()
	q.log.Info("VM network", "agent", v.id, "job", req.JobID, "ip", ip, "tap", v.tap, "bridge", h.net.BridgeName)
	if err := h.setupTap(ctx, v.tap, v.tag, *q.entry.UID, *q.entry.GID); err != nil {
		return nil, fmt.Errorf("TAP %s: %w", v.tap, err)
	}
	ports := []int{port}
	for _, p := range q.entry.HostPorts {
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	for _, p := range ports {
		if err := h.allowHost(ctx, ip, p, v.tag); err != nil {
			return nil, fmt.Errorf("nftables rule: %w", err)
		}
	}
	req.Emit(EventProvisioning, fmt.Sprintf("VM %s: bridge network attached", v.id))
	guestURL := *u
	guestURL.Host = net.JoinHostPort(gw.String(), strconv.Itoa(port))
	env := agentVars(req, q.opts.Environ)
	for i, kv := range env {
		if strings.HasPrefix(kv, "KICI_ORCHESTRATOR_URL=") {
			env[i] = "KICI_ORCHESTRATOR_URL=" + guestURL.String()
		}
	}
	return &vmguest.Config{Hostname: req.AgentID, Env: env,
		Address: netip.PrefixFrom(ip, h.net.Prefix().Bits()).String(), Gateway: gw.String()}, nil
}

// teardownTap removes VM v's vms_in rules and TAP and releases its
// address (nothing when v is on QEMU's user network). Errors are logged;
// every step runs.
func (q *QEMU) teardownTap(v *qemuVM) {
	if v.tag == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.host.deleteRules(ctx, v.tag); err != nil {
		q.log.Warn("remove nft rules", "agent", v.id, "err", err)
	}
	if _, err := q.host.run.Run(ctx, "", "ip", "link", "del", "dev", v.tap); err != nil {
		q.log.Debug("remove TAP", "agent", v.id, "err", err)
	}
	q.host.alloc.Release(v.id)
}

// macOf is VM v's MAC on the bridge (derived from its address, as for
// Firecracker VMs), "" on QEMU's user network.
func macOf(v *qemuVM) string {
	if v.tap == "" {
		return ""
	}
	return guestMAC(v.ip)
}
