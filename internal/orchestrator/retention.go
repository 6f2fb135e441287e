package orchestrator

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/retention"
	"kici.dev/kici/internal/store"
)

// newRetention builds the retention sweeper from the KICI_*_RETENTION_DAYS
// and *_TTL_DAYS variables; it runs on the node holding the retention
// lease, held under the node id.
func newRetention(st store.Store, logs logstore.Store, holder string, reg prometheus.Registerer, logger *slog.Logger) (*retention.Sweeper, error) {
	cfg, err := retention.LoadConfig(os.Environ())
	if err != nil {
		return nil, err
	}
	return retention.New(cfg, st, logs, holder, reg, logger), nil
}
