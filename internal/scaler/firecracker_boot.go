package scaler

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"kici.dev/kici/internal/scaler/scalerconfig"
)

// vmSize resolves vCPUs and memory: limits (cpus rounded up, memory
// floored to MiB) > the scaler's vcpuCount/memSizeMib.
func vmSize(e *Entry, l Limits) (vcpus, memMib int) {
	vcpus, memMib = e.VcpuCount, e.MemSizeMib
	if l.NanoCPUs > 0 {
		vcpus = int((l.NanoCPUs + 1e9 - 1) / 1e9)
	}
	if l.MemoryBytes > 0 {
		memMib = int(l.MemoryBytes >> 20)
	}
	return vcpus, memMib
}

// bootArgs is the guest kernel command line (KiCI buildVmConfig) with the
// static address of the VM.
func bootArgs(ip, gw netip.Addr, bits int) string {
	m := uint32(0xffffffff) << (32 - bits)
	mask := [4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
	return fmt.Sprintf("console=ttyS0 reboot=k panic=1 random.trust_cpu=on init=/init ip=%s::%s:%s::eth0:off",
		ip, gw, netip.AddrFrom4(mask))
}

// guestMAC is 06:00:AC plus the address's last three octets (KiCI).
func guestMAC(ip netip.Addr) string {
	a := ip.As4()
	return fmt.Sprintf("06:00:AC:%02X:%02X:%02X", a[1], a[2], a[3])
}

// orchestratorPort is the TCP port of a ws:// or wss:// URL.
func orchestratorPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("orchestrator URL %q: %w", raw, err)
	}
	if p := u.Port(); p != "" {
		return strconv.Atoi(p)
	}
	switch u.Scheme {
	case "ws", "http":
		return 80, nil
	case "wss", "https":
		return 443, nil
	}
	return 0, fmt.Errorf("orchestrator URL %q has no port", raw)
}

// metadata is the MMDS document the guest agent reads (see
// docs/scaling.md, "MMDS contract").
func (f *Firecracker) metadata(req *SpawnRequest) (map[string]any, error) {
	env := map[string]string{}
	size := 0
	add := func(k, v string) error {
		if !scalerconfig.IsEnvName(k) {
			return nil
		}
		size += len(k) + len(v) + 2
		if size > mmdsEnvBudget {
			return fmt.Errorf("agent environment exceeds the MMDS budget of %d bytes", mmdsEnvBudget)
		}
		env[k] = v
		return nil
	}
	for _, kv := range forwardedEnv(f.opts.Environ) {
		k, v, _ := strings.Cut(kv, "=")
		if err := add(k, v); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(req.LabelSet.Env))
	for k := range req.LabelSet.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := add(k, req.LabelSet.Env[k]); err != nil {
			return nil, err
		}
	}
	md := map[string]any{
		"kici-orchestrator-url": req.OrchestratorURL,
		"kici-agent-id":         req.AgentID,
		"kici-agent-token":      req.Token,
		"kici-labels":           strings.Join(req.LabelSet.Labels, ","),
		"kici-scaler-managed":   "true",
		"kici-gateway-ip":       f.host.net.GatewayAddr().String(),
		"kici-env":              env,
	}
	if req.Warm {
		md["kici-scaler-idle-timeout"] = warmAgentIdleTimeoutMs
	}
	return map[string]any{"latest": map[string]any{"meta-data": md}}, nil
}
