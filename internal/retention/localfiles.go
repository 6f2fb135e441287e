package retention

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultAgentLogDays is KICI_AGENT_LOG_TTL_DAYS's default: how long the
// output file of a spawned agent (<KICI_DATA_DIR>/agents/<agentId>.log) is
// kept after its last write.
const DefaultAgentLogDays = 14

// AgentLogKind is the kind label of kici_orch_retention_swept_total for
// agent output files.
const AgentLogKind = "agent_logs"

// SweepAgentLogs deletes the files <dir>/*.log last written before cutoff
// whose agent is not running (no <agentId>.pid beside it: the bare-metal
// backend keeps one while the process lives), and returns how many it
// deleted. A missing dir deletes nothing. These files are local to the
// node that spawned the agents, so every node sweeps its own, lease or
// not.
func SweepAgentLogs(dir string, cutoff time.Time) (int, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".log") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(name, ".log")+".pid")); err == nil {
			continue // the agent still runs and writes here
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
			return n, err
		}
		n++
	}
	return n, nil
}

// sweepLocal runs the sweeps of this node's own files (agent output
// files); Run calls it on every node at every interval.
func (s *Sweeper) sweepLocal() {
	if s.cfg.AgentLogs <= 0 || s.cfg.AgentLogDir == "" {
		return
	}
	n, err := SweepAgentLogs(s.cfg.AgentLogDir, s.now().Add(-s.cfg.AgentLogs))
	s.swept.WithLabelValues(AgentLogKind).Add(float64(n))
	if err != nil {
		s.log.Warn("retention: agent logs", "dir", s.cfg.AgentLogDir, "err", err)
	}
	if n > 0 {
		s.log.Info("retention: swept", "agentLogs", n)
	}
}
