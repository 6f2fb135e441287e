package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// VMNetworks holds the host side of each VM bridge of a scalers.yaml's
// firecracker: block — the bridge, its nftables table and the address
// allocator — shared by the firecracker scalers and the qemu scalers with
// network: tap that use it, so no address is handed out twice. Build one
// per orchestrator and give it to both backends' options. Safe for
// concurrent use.
type VMNetworks struct {
	run   HostRunner
	mu    sync.Mutex
	hosts map[string]*fcHost
}

// NewVMNetworks returns an empty registry whose host commands run through
// run (nil: ExecRunner).
func NewVMNetworks(run HostRunner) *VMNetworks {
	if run == nil {
		run = ExecRunner{}
	}
	return &VMNetworks{run: run, hosts: map[string]*fcHost{}}
}

// host returns the host side of n's bridge, creating it on first use; a
// later block for the same bridge that differs is refused (it cannot
// change while the orchestrator runs).
func (v *VMNetworks) host(n *FirecrackerNetwork) (*fcHost, error) {
	if n == nil {
		return nil, errors.New("a VM scaler on the bridge network without a validated firecracker: block")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.hosts[n.BridgeName]
	if h != nil && (h.net.CIDR != n.CIDR || h.net.Gateway != n.Gateway || h.net.Table != n.Table ||
		*h.net.AutoProvisionHost != *n.AutoProvisionHost) {
		return nil, fmt.Errorf("the firecracker: block of bridge %s cannot change while the orchestrator runs (restart to apply it)", n.BridgeName)
	}
	if h == nil {
		h = &fcHost{net: n, run: v.run, alloc: NewIPAllocator(n.Prefix(), n.GatewayAddr())}
		v.hosts[n.BridgeName] = h
	}
	return h, nil
}

// reapTagged removes the TAPs and vms_in rules tagged for scaler that
// tracked does not claim (what a killed orchestrator left), releasing
// their addresses. It returns how many it removed.
func (h *fcHost) reapTagged(ctx context.Context, scaler string, tracked func(id string) bool) (int, error) {
	prefix := "kici-fc:" + scaler + ":"
	n := 0
	taps, err := h.taggedTaps(ctx)
	if err != nil {
		return n, err
	}
	for name, tag := range taps {
		id, ok := strings.CutPrefix(tag, prefix)
		if !ok || tracked(id) {
			continue
		}
		if _, err := h.run.Run(ctx, "", "ip", "link", "del", "dev", name); err != nil {
			return n, err
		}
		h.alloc.Release(id)
		n++
	}
	rules, err := h.vmRules(ctx)
	if err != nil {
		return n, err
	}
	for tag, handles := range rules {
		id, ok := strings.CutPrefix(tag, prefix)
		if !ok || tracked(id) {
			continue
		}
		for _, hd := range handles {
			if _, err := h.run.Run(ctx, "", "nft", "delete", "rule", "inet", h.net.Table, vmsInChain, "handle", hd); err != nil {
				return n, err
			}
			n++
		}
		h.alloc.Release(id)
	}
	return n, nil
}
