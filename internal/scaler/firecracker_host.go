package scaler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"kici.dev/kici/internal/scaler/scalerconfig"
)

// HostRunner runs the privileged host commands of the Firecracker backend
// (ip, nft, sysctl). argv[0] is the program; stdin, when not empty, is fed
// to it. It returns stdout; a failure's error carries stderr.
type HostRunner interface {
	Run(ctx context.Context, stdin string, argv ...string) (string, error)
}

// ExecRunner is the HostRunner that executes the commands (found on PATH).
type ExecRunner struct{}

// Run executes argv.
func (ExecRunner) Run(ctx context.Context, stdin string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// IPAllocator hands out the VM addresses of a subnet: the first free host
// address, skipping the network, gateway and broadcast addresses (a /24
// gives 253). An address is never held by two owners. Safe for concurrent
// use.
type IPAllocator struct {
	prefix netip.Prefix
	gw     netip.Addr

	mu      sync.Mutex
	owner   map[netip.Addr]string
	byOwner map[string]netip.Addr
}

// NewIPAllocator returns an empty allocator over prefix with gateway gw.
func NewIPAllocator(prefix netip.Prefix, gw netip.Addr) *IPAllocator {
	return &IPAllocator{prefix: prefix.Masked(), gw: gw, owner: map[netip.Addr]string{}, byOwner: map[string]netip.Addr{}}
}

// ErrSubnetFull is returned by Allocate when every address is taken.
var ErrSubnetFull = errors.New("no free address left in the firecracker subnet")

// Allocate gives owner the first free address (or the one it holds).
func (a *IPAllocator) Allocate(owner string) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byOwner[owner]; ok {
		return ip, nil
	}
	bcast := scalerconfig.LastAddr(a.prefix)
	for ip := a.prefix.Addr().Next(); a.prefix.Contains(ip) && ip != bcast; ip = ip.Next() {
		if ip == a.gw {
			continue
		}
		if _, used := a.owner[ip]; !used {
			a.owner[ip] = owner
			a.byOwner[owner] = ip
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w (%s)", ErrSubnetFull, a.prefix)
}

// Reserve records that owner holds ip (a live VM found at start); it fails
// when ip is outside the subnet, reserved, or held by another owner.
func (a *IPAllocator) Reserve(ip netip.Addr, owner string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.prefix.Contains(ip) || ip == a.gw || ip == a.prefix.Addr() || ip == scalerconfig.LastAddr(a.prefix) {
		return fmt.Errorf("address %s is not a VM address of %s", ip, a.prefix)
	}
	if o, used := a.owner[ip]; used && o != owner {
		return fmt.Errorf("address %s is held by %s", ip, o)
	}
	a.owner[ip] = owner
	a.byOwner[owner] = ip
	return nil
}

// Release frees owner's address (no-op when it holds none).
func (a *IPAllocator) Release(owner string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byOwner[owner]; ok {
		delete(a.owner, ip)
		delete(a.byOwner, owner)
	}
}

// InUse returns a copy of owner → address.
func (a *IPAllocator) InUse() map[string]netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := make(map[string]netip.Addr, len(a.byOwner))
	for k, v := range a.byOwner {
		m[k] = v
	}
	return m
}

// fcHost is the host side shared by the firecracker scalers of one
// network block: the bridge, the nftables table and the IP allocator.
type fcHost struct {
	net    *FirecrackerNetwork
	run    HostRunner
	alloc  *IPAllocator
	mu     sync.Mutex // serialises EnsureHostReady
	readyE error
	ready  bool
}

// vmsInChain is the regular chain holding each VM's host-access rule.
const vmsInChain = "vms_in"

// baselineScript is the nft script (applied atomically with nft -f -)
// that creates the table and its chains when missing and refills the
// baseline rules; per-VM rules in vms_in are kept. From the bridge, the
// host accepts only what vms_in accepts; forwarding between VMs and from
// VMs to private and link-local ranges is dropped; VM egress elsewhere is
// masqueraded.
func (h *fcHost) baselineScript() string {
	t, br := h.net.Table, h.net.BridgeName
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	w("add table inet %s", t)
	w("add chain inet %s %s", t, vmsInChain)
	w("add chain inet %s input { type filter hook input priority 0 ; policy accept ; }", t)
	w("flush chain inet %s input", t)
	w("add rule inet %s input iifname \"%s\" jump %s", t, br, vmsInChain)
	w("add rule inet %s input iifname \"%s\" drop", t, br)
	w("add chain inet %s forward { type filter hook forward priority 0 ; policy accept ; }", t)
	w("flush chain inet %s forward", t)
	w("add rule inet %s forward iifname \"%s\" oifname \"%s\" drop", t, br, br)
	w("add rule inet %s forward iifname \"%s\" ip daddr { 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 169.254.0.0/16 } drop", t, br)
	w("add chain inet %s postrouting { type nat hook postrouting priority 100 ; policy accept ; }", t)
	w("flush chain inet %s postrouting", t)
	w("add rule inet %s postrouting ip saddr %s oifname != \"%s\" masquerade", t, h.net.CIDR, br)
	return b.String()
}

// EnsureHostReady verifies the bridge (present, up, holding the gateway
// address) and the nftables table with its baseline; with
// autoProvisionHost it creates what is missing and (re)applies the
// baseline. The result is remembered; a failure is retried on the next
// call (reload).
func (h *fcHost) EnsureHostReady(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready {
		return nil
	}
	err := h.ensure(ctx)
	h.readyE = err
	h.ready = err == nil
	return err
}

func (h *fcHost) ensure(ctx context.Context) error {
	n := h.net
	auto := *n.AutoProvisionHost
	br := n.BridgeName
	addr := fmt.Sprintf("%s/%d", n.GatewayAddr(), n.Prefix().Bits())
	if _, err := h.run.Run(ctx, "", "ip", "link", "show", "dev", br); err != nil {
		if !auto {
			return fmt.Errorf("bridge %s is missing and autoProvisionHost is false: %w", br, err)
		}
		if _, err := h.run.Run(ctx, "", "ip", "link", "add", "name", br, "type", "bridge"); err != nil {
			return fmt.Errorf("create bridge %s: %w", br, err)
		}
	}
	out, err := h.run.Run(ctx, "", "ip", "-4", "-o", "addr", "show", "dev", br)
	if err != nil {
		return fmt.Errorf("read addresses of %s: %w", br, err)
	}
	if !strings.Contains(out, "inet "+addr+" ") {
		if !auto {
			return fmt.Errorf("bridge %s does not hold %s and autoProvisionHost is false", br, addr)
		}
		if _, err := h.run.Run(ctx, "", "ip", "addr", "add", addr, "dev", br); err != nil {
			return fmt.Errorf("assign %s to %s: %w", addr, br, err)
		}
	}
	if auto {
		if _, err := h.run.Run(ctx, "", "ip", "link", "set", "dev", br, "up"); err != nil {
			return fmt.Errorf("bring %s up: %w", br, err)
		}
		if _, err := h.run.Run(ctx, "", "sysctl", "-w", "net.ipv4.ip_forward=1"); err != nil {
			return fmt.Errorf("enable forwarding: %w", err)
		}
		if _, err := h.run.Run(ctx, h.baselineScript(), "nft", "-f", "-"); err != nil {
			return fmt.Errorf("nftables table %s: %w", n.Table, err)
		}
		return nil
	}
	out, err = h.run.Run(ctx, "", "ip", "-o", "link", "show", "dev", br)
	if err != nil || !linkUp(out) {
		return fmt.Errorf("bridge %s is down and autoProvisionHost is false", br)
	}
	out, err = h.run.Run(ctx, "", "nft", "list", "chain", "inet", n.Table, "input")
	if err != nil || !strings.Contains(out, "jump "+vmsInChain) {
		return fmt.Errorf("nftables table inet %s lacks its input baseline (jump %s) and autoProvisionHost is false", n.Table, vmsInChain)
	}
	if _, err := h.run.Run(ctx, "", "nft", "list", "chain", "inet", n.Table, vmsInChain); err != nil {
		return fmt.Errorf("nftables chain inet %s %s is missing and autoProvisionHost is false", n.Table, vmsInChain)
	}
	return nil
}

// linkUp reports whether `ip -o link show` output has the UP flag.
func linkUp(out string) bool {
	i, j := strings.Index(out, "<"), strings.Index(out, ">")
	if i < 0 || j < i {
		return false
	}
	for _, f := range strings.Split(out[i+1:j], ",") {
		if f == "UP" {
			return true
		}
	}
	return false
}

// tapName is the TAP of VM id: kici- plus the id's last 8 characters
// (KiCI; fits IFNAMSIZ).
func tapName(id string) string {
	if len(id) > 8 {
		id = id[len(id)-8:]
	}
	return "kici-" + id
}

// vmTag marks a VM's TAP (as its alias) and nft rule (as its comment).
func vmTag(scaler, id string) string { return "kici-fc:" + scaler + ":" + id }

var (
	linkLineRe = regexp.MustCompile(`^\d+:\s+([^:@\s]+)[@:]`)
	aliasRe    = regexp.MustCompile(`\balias (kici-fc:[a-z0-9-]+:[A-Za-z0-9-]+)`)
	ruleRe     = regexp.MustCompile(`comment "(kici-fc:[a-z0-9-]+:[A-Za-z0-9-]+)".*# handle (\d+)`)
)

// setupTap creates the VM's TAP owned by uid:gid (so the jailed,
// unprivileged firecracker may attach to it), tags it, enslaves it to the
// bridge as an isolated port (no frames to other isolated ports) and
// brings it up.
func (h *fcHost) setupTap(ctx context.Context, tap, tag string, uid, gid int) error {
	for _, argv := range [][]string{
		{"ip", "tuntap", "add", "dev", tap, "mode", "tap", "user", strconv.Itoa(uid), "group", strconv.Itoa(gid)},
		{"ip", "link", "set", "dev", tap, "alias", tag},
		{"ip", "link", "set", "dev", tap, "master", h.net.BridgeName},
		{"ip", "link", "set", "dev", tap, "type", "bridge_slave", "isolated", "on"},
		{"ip", "link", "set", "dev", tap, "up"},
	} {
		if _, err := h.run.Run(ctx, "", argv...); err != nil {
			return err
		}
	}
	return nil
}

// allowHost adds the VM's only host-access rule: TCP from its address to
// the orchestrator port.
func (h *fcHost) allowHost(ctx context.Context, ip netip.Addr, port int, tag string) error {
	_, err := h.run.Run(ctx, "", "nft", "add", "rule", "inet", h.net.Table, vmsInChain,
		"ip", "saddr", ip.String(), "tcp", "dport", strconv.Itoa(port), "accept", "comment", `"`+tag+`"`)
	return err
}

// vmRules lists the tagged rules of vms_in: tag → handles.
func (h *fcHost) vmRules(ctx context.Context) (map[string][]string, error) {
	out, err := h.run.Run(ctx, "", "nft", "-a", "list", "chain", "inet", h.net.Table, vmsInChain)
	if err != nil {
		return nil, err
	}
	m := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if mm := ruleRe.FindStringSubmatch(line); mm != nil {
			m[mm[1]] = append(m[mm[1]], mm[2])
		}
	}
	return m, nil
}

// deleteRules removes the vms_in rules tagged tag.
func (h *fcHost) deleteRules(ctx context.Context, tag string) error {
	rules, err := h.vmRules(ctx)
	if err != nil {
		return err
	}
	for _, handle := range rules[tag] {
		if _, err := h.run.Run(ctx, "", "nft", "delete", "rule", "inet", h.net.Table, vmsInChain, "handle", handle); err != nil {
			return err
		}
	}
	return nil
}

// taggedTaps lists host interfaces carrying a kici-fc: alias: name → tag.
func (h *fcHost) taggedTaps(ctx context.Context) (map[string]string, error) {
	out, err := h.run.Run(ctx, "", "ip", "-o", "link", "show")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		n := linkLineRe.FindStringSubmatch(line)
		a := aliasRe.FindStringSubmatch(line)
		if n != nil && a != nil {
			m[n[1]] = a[1]
		}
	}
	return m, nil
}
