package scaler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// adoptOthers reserves the addresses of live VMs of other scalers found in
// the jail directory (rebuilding the allocator after a restart).
func (f *Firecracker) adoptOthers() {
	for _, r := range f.records() {
		if r.Scaler == f.name || !pidAlive(r.Pid, r.AgentID) {
			continue
		}
		if ip, err := netip.ParseAddr(r.IP); err == nil {
			if err := f.host.alloc.Reserve(ip, r.AgentID); err != nil {
				f.log.Warn("live VM address not reserved", "agent", r.AgentID, "err", err)
			}
		}
	}
}

func (f *Firecracker) records() []vmRecord {
	ents, err := os.ReadDir(f.base)
	if err != nil {
		return nil
	}
	var out []vmRecord
	for _, d := range ents {
		if !d.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(f.base, d.Name(), vmRecordFile))
		if err != nil {
			continue
		}
		var r vmRecord
		if json.Unmarshal(b, &r) == nil && r.AgentID == d.Name() {
			out = append(out, r)
		}
	}
	return out
}

// pidAlive reports whether pid runs and its command line names VM id (a
// recycled pid does not count).
func pidAlive(pid int, id string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(string(b), "\x00"), id)
}

func (f *Firecracker) sweepLoop() {
	t := time.NewTicker(f.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			if _, err := f.ReapOrphans(ctx); err != nil {
				f.log.Warn("firecracker orphan sweep", "err", err)
			}
			cancel()
		}
	}
}

// ReapOrphans removes what this scaler created but does not track (left
// by a killed orchestrator): jails tagged with its name (their VMM process
// group is killed first), TAPs whose alias carries its name, and its
// tagged nft rules. It first retries EnsureHostReady when the host was not
// ready (the Manager calls ReapOrphans on reload). It returns how many
// leftovers it removed; it never runs twice at once.
func (f *Firecracker) ReapOrphans(ctx context.Context) (int, error) {
	f.sweepMu.Lock()
	defer f.sweepMu.Unlock()
	if err := f.host.EnsureHostReady(ctx); err != nil {
		return 0, fmt.Errorf("firecracker host not ready: %w", err)
	}
	tracked := func(id string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		_, ok := f.vms[id]
		return ok
	}
	n := 0
	for _, r := range f.records() {
		if r.Scaler != f.name || tracked(r.AgentID) {
			continue
		}
		if pidAlive(r.Pid, r.AgentID) {
			_ = syscall.Kill(-r.Pid, syscall.SIGKILL)
		}
		if err := os.RemoveAll(filepath.Join(f.base, r.AgentID)); err != nil {
			return n, err
		}
		f.host.alloc.Release(r.AgentID)
		f.log.Info("removed orphaned microVM jail", "agent", r.AgentID)
		n++
	}
	m, err := f.host.reapTagged(ctx, f.name, tracked)
	if m > 0 {
		f.log.Info("removed orphaned TAPs and nftables rules", "count", m)
	}
	n += m
	if err != nil {
		return n, err
	}
	return n, nil
}
