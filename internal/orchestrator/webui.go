package orchestrator

import (
	"log/slog"
	"os"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/web"
)

// newWebUI builds the web UI on the same services the admin API uses.
func newWebUI(cfg *config.Config, st store.Store, adminAuth *auth.AdminAuth, logs logstore.Store, s *Server,
	settings *cluster.Reader, logger *slog.Logger) (*web.UI, error) {
	// KICI_PUBLIC_URL, validated as the forge reporter reads it.
	fc, err := config.LoadForgeStatus(os.Environ())
	if err != nil {
		return nil, err
	}
	signIn, err := webSignIn(fc.PublicURL)
	if err != nil {
		return nil, err
	}
	return web.New(web.Deps{
		Store: st, Auth: adminAuth, Logs: logs,
		Cancel: s.runctl, Rerun: s.processor, Approval: s.decider,
		Agents:   func() []dispatch.AgentInfo { return s.dispatcher.Agents() },
		Scalers:  s.scaler.Status,
		Drain:    func() runctl.DrainStatus { return s.runctl.Drain() },
		Settings: settings, Version: Version, Mode: cfg.Mode,
		PublicURL: fc.PublicURL, SignIn: signIn,
		Logger: logger.With("component", "web"),
	})
}
