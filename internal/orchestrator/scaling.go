package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/scaler/kubernetes"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/store"
)

// jobContainers reads the container and services job jobID's lock entry
// declares (nil when neither), for the kubernetes scaler's pod.
func jobContainers(ctx context.Context, st store.Store, jobID string) (*scaler.JobContainers, error) {
	job, err := st.GetJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	var lj lockfile.Job
	if err := json.Unmarshal(job.Config, &lj); err != nil {
		return nil, fmt.Errorf("job %s: lock entry: %w", jobID, err)
	}
	if lj.Container == nil && len(lj.Services) == 0 {
		return nil, nil
	}
	return &scaler.JobContainers{Container: lj.Container, Services: lj.Services}, nil
}

// newScaler loads scalers.yaml (or the embedded default) and builds the
// scaler Manager with its backends and metrics; it sees the dispatcher's
// agents once the dispatcher exists (scaler.Manager.Serve).
func newScaler(cfg *config.Config, agentBinary string, agentAuth *auth.AgentAuth, settings *cluster.Reader,
	logs logstore.Store, st store.Store, reg *prometheus.Registry, logger *slog.Logger) (*scaler.Manager, error) {
	scfg, err := scalerconfig.LoadConfig(cfg.ScalerConfigPath, cfg.ScalerConfigDir, cfg.MaxAgents)
	if err != nil {
		return nil, err
	}
	metrics := scaler.NewMetrics(reg)
	// Firecracker and qemu (network: tap) scalers share each bridge's
	// nftables table and address allocator.
	nets := scaler.NewVMNetworks(nil)
	return scaler.NewManager(scfg, scaler.Options{
		Tokens:   agentAuth,
		Settings: settings,
		Backends: kubernetes.With(scaler.WithQEMU(scaler.WithFirecracker(scaler.Backends(scaler.BackendOptions{
			BareMetal: scaler.BareMetalOptions{
				AgentBinary: agentBinary,
				WorkDir:     workDir(cfg),
				HidePaths:   []string{cfg.DataDir},
				LogDir:      filepath.Join(cfg.DataDir, agentLogDir),
				TLSCAFile:   agentCAFile(cfg),
				Logger:      logger,
			},
			Container: scaler.ContainerOptions{Logger: logger},
		}), scaler.FirecrackerOptions{Logger: logger, Networks: nets}), scaler.QEMUOptions{Logger: logger, Networks: nets}),
			kubernetes.Options{Logger: logger}),
		JobContainers: func(ctx context.Context, jobID string) (*scaler.JobContainers, error) {
			return jobContainers(ctx, st, jobID)
		},
		Events:  logs,
		Metrics: metrics,
		Logger:  logger,
	})
}

// workDir is the parent of bare-metal agents' work directories:
// KICI_WORK_DIR, else scaler.DefaultWorkDir — never inside the data
// directory, where a step would find the admin token and the database.
// agentCAFile is the CA file spawned agents trust besides the system
// roots: KICI_TLS_CA_FILE, else with TLS the served certificate itself
// (what a self-signed certificate needs; a CA-signed one verifies anyway).
func agentCAFile(cfg *config.Config) string {
	if cfg.TLSCAFile != "" || !cfg.TLS() {
		return cfg.TLSCAFile
	}
	return cfg.TLSCertFile
}

func workDir(cfg *config.Config) string {
	if cfg.WorkDir != "" {
		return cfg.WorkDir
	}
	return scaler.DefaultWorkDir()
}

// ReloadScalers re-reads scalers.yaml and applies it atomically; on any
// error the running configuration stays and the error is returned.
func (s *Server) ReloadScalers() error {
	if s.cfg.ScalerConfigPath == "" {
		s.log.Info("SIGHUP: no scalers.yaml configured (KICI_SCALER_CONFIG_PATH); nothing to reload")
		return nil
	}
	scfg, err := scalerconfig.LoadConfig(s.cfg.ScalerConfigPath, s.cfg.ScalerConfigDir, s.cfg.MaxAgents)
	if err == nil {
		err = s.scaler.Reload(scfg)
	}
	s.scaler.Metrics().Reload(err == nil)
	if err != nil {
		s.log.Error("scaler config reload failed; the previous configuration stays in force", "err", err)
		return err
	}
	s.log.Info("scaler config reloaded", "scalers", len(scfg.Scalers))
	return nil
}

// catchSIGHUP starts holding SIGHUP for reloadOnSIGHUP. New calls it
// before it announces the server (the endpoint file), because until then
// the signal's default action would end the process: a reload sent by an
// operator or a unit manager while the orchestrator starts must be applied
// once it runs, not kill it. One pending signal is kept.
func (s *Server) catchSIGHUP() {
	s.hup = make(chan os.Signal, 1)
	signal.Notify(s.hup, syscall.SIGHUP)
	s.cleanup.pushFunc("SIGHUP handler", func() { signal.Stop(s.hup) })
}

// reloadOnSIGHUP reloads the TLS certificate and the scaler configuration
// on every SIGHUP caught
// since New until the returned stop function is called.
func (s *Server) reloadOnSIGHUP() func() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.hup:
				s.reloadTLS()
				_ = s.ReloadScalers()
			}
		}
	}()
	return cancel
}
