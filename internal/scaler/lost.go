package scaler

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Agents lost with the orchestrator. When the orchestrator and the agents
// it spawned die together (a host crash, kill -9 of the process group), the
// jobs those agents ran stay "running" in the store, and only the stale
// detector would end them, two heartbeat intervals later. At start each
// backend reports the agents of the previous process that are gone for
// sure, and the orchestrator ends their jobs at once: the bare-metal
// backend keeps a pid file per running agent next to its log; the container
// backend removes the previous process's containers (ReapOrphans) and
// reports those.

// lostReporter is implemented by backends that can name, once, the agents
// of a previous orchestrator process that no longer run.
type lostReporter interface {
	LostAtStart() []string
}

// LostAgents returns the ids of agents spawned by a previous process of
// this orchestrator (same data directory) that are gone: their jobs can be
// ended now. Each id is reported once.
func (m *Manager) LostAgents() []string {
	m.mu.Lock()
	var reps []lostReporter
	for _, sc := range m.scalers {
		if r, ok := sc.backend.(lostReporter); ok {
			reps = append(reps, r)
		}
	}
	m.mu.Unlock()
	var ids []string
	for _, r := range reps {
		ids = append(ids, r.LostAtStart()...)
	}
	return ids
}

// pidFile is where a running agent's pid and start time are kept.
func (b *BareMetal) pidFile(agentID string) string {
	return filepath.Join(b.opts.LogDir, agentID+".pid")
}

// writePidFile records a started agent: "<pid> <start time>", the start
// time (clock ticks since boot, /proc/<pid>/stat field 22) telling a later
// process with the same pid apart.
func (b *BareMetal) writePidFile(agentID string, pid int) {
	if b.opts.LogDir == "" {
		return
	}
	line := fmt.Sprintf("%d %d\n", pid, procStartTime(pid))
	if err := os.WriteFile(b.pidFile(agentID), []byte(line), 0o600); err != nil {
		b.log.Warn("agent pid file", "agent", agentID, "err", err)
	}
}

// LostAtStart reports the agents whose pid file a previous process left and
// that no longer run, removing their pid files. Agents still running are
// left alone (they reconnect and reclaim their jobs).
func (b *BareMetal) LostAtStart() []string {
	if b.opts.LogDir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(b.opts.LogDir, "*.pid"))
	var lost []string
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".pid")
		b.mu.Lock()
		mine := b.procs[id] != nil
		b.mu.Unlock()
		if mine {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		var start int64
		if n, _ := fmt.Sscan(string(data), &pid, &start); n >= 1 && pid > 0 && procStartTime(pid) == start && start != 0 {
			continue // still running
		}
		lost = append(lost, id)
		_ = os.Remove(f)
	}
	return lost
}

// procStartTime returns a process's start time in clock ticks since boot
// (0 when it does not exist or /proc is absent).
func procStartTime(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return 0
	}
	n, _ := strconv.ParseInt(f[19], 10, 64)
	return n
}

// LostAtStart reports the agents whose containers the orchestrator removed
// at start as orphans of a previous process.
func (c *Container) LostAtStart() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := c.reaped
	c.reaped = nil
	return ids
}
