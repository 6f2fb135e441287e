package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/google/uuid"

	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/forgestatus"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/store"
)

// setupForgeStatus builds the forge reporter: check runs and commit
// statuses for every run of a GitHub or universal-git source, sharing the
// pipeline's GitHub clients (and so their installation tokens).
func setupForgeStatus(st store.Store, forges *ingest.Forges, logs logstore.Store, settings *cluster.Reader, logger *slog.Logger) (*forgestatus.Reporter, error) {
	fc, err := config.LoadForgeStatus(os.Environ())
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return forgestatus.New(st, forgestatus.Config{
		PublicURL:    fc.PublicURL,
		GitHubClient: forges.GitHubClient,
		HTTP:         forges.HTTP,
		TTLDays: func(ctx context.Context) int64 {
			return settings.Int(ctx, cluster.CheckRunTrackingTTLDays)
		},
		Logs:   logs,
		Holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8]),
		Logger: logger,
	}), nil
}

// forgeTTLDays is KICI_CHECK_RUN_TRACKING_TTL_DAYS, the default of the
// cluster setting checkRunTrackingTtlDays (an invalid value is reported
// by setupForgeStatus; 7 until then).
func forgeTTLDays() int64 {
	fc, err := config.LoadForgeStatus(os.Environ())
	if err != nil {
		return 7
	}
	return fc.TTLDays
}
