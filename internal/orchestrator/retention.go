package orchestrator

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/retention"
	"kici.dev/kici/internal/store"
)

// agentLogDir is the data directory's folder of spawned agents' output
// files and pid files (bare-metal backend).
const agentLogDir = "agents"

// newRetention builds the retention sweeper from the KICI_*_RETENTION_DAYS
// and *_TTL_DAYS variables; it runs on the node holding the retention
// lease, held under the node id, and sweeps this node's agent output
// files (<dataDir>/agents) on every node.
func newRetention(st store.Store, logs logstore.Store, dataDir, holder string, reg prometheus.Registerer, logger *slog.Logger) (*retention.Sweeper, error) {
	cfg, err := retention.LoadConfig(os.Environ())
	if err != nil {
		return nil, err
	}
	cfg.AgentLogDir = filepath.Join(dataDir, agentLogDir)
	return retention.New(cfg, st, logs, holder, reg, logger), nil
}
