package orchestrator

import (
	"context"
	"log/slog"
	"path/filepath"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/logstore"
)

// openStepLogs opens the step-log store KICI_STEP_LOG_STORE names: in the
// PostgreSQL database (shared by every node, the default with
// KICI_DATABASE_URL) or files under <data dir>/logs. The store's migrations
// have created the tables by now. close releases it at shutdown.
func openStepLogs(ctx context.Context, cfg *config.Config, logger *slog.Logger) (logs logstore.Store, close func(), err error) {
	if cfg.StepLogStore == config.StepLogsPostgres {
		pg, err := logstore.OpenPG(ctx, cfg.DatabaseURL, logger)
		if err != nil {
			return nil, nil, err
		}
		return pg, pg.Close, nil
	}
	return logstore.NewFS(filepath.Join(cfg.DataDir, "logs")), func() {}, nil
}
