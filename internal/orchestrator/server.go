// Package orchestrator wires kici's server together: configuration, store,
// tracker, pipeline, dispatcher, scaler, ingress and the admin API. It owns
// startup order, recovery at start and graceful shutdown; every piece of
// behaviour lives in its own package.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/backup"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/forgestatus"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/jobblobs"
	"kici.dev/kici/internal/membership"
	"kici.dev/kici/internal/memtrim"
	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/readiness"
	"kici.dev/kici/internal/retention"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/startpages"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/tlsconf"
)

// Version is the orchestrator build version, reported by /health.
var Version = "0.2.0-dev"

// Server is one running orchestrator.
type Server struct {
	cfg        *config.Config
	log        *slog.Logger
	store      store.Store
	dispatcher *dispatch.Dispatcher
	scaler     *scaler.Manager
	metrics    *prometheus.Registry
	processor  *ingest.Processor
	tracker    *runs.Tracker
	// restored is set when the node starts on a restored backup.
	restored   *backup.RestoreStart
	runctl     *runctl.Controller
	blobs      *jobblobs.Service
	logArchive *logArchive // finished step logs to the blob store; nil when off
	httpSrv    *http.Server
	listener   net.Listener
	ingress    *ingressWiring
	resumer    *approval.Resumer     // ends holds and resumes held work
	retention  *retention.Sweeper    // deletes expired history (retention.go)
	decider    *approval.Decider     // held-run decisions (admin API)
	reporter   *forgestatus.Reporter // check runs and commit statuses
	notifier   *notify.Notifier      // notification subscriptions (notify.go)
	nodeID     string                // this node's id and lease holder (node.go)
	startedAt  time.Time             // process start, in the node registry
	cleanup    cleanupStack          // every acquired resource, released last first (cleanup.go)
	stopScaler func()                // stops spawned agents once (Run calls it first)
	peers      *membership.Peers     // the other nodes of a cluster; nil on SQLite
	node       *membership.Node      // this node's registry row, heartbeats and drain
	hup        chan os.Signal        // SIGHUPs caught since New (scaling.go)
	dbHealth   *readiness.Database   // database round trips for /ready and /metrics; nil for a store without a schema
	tls        *tlsconf.Reloader     // the served certificate; nil without TLS (tls.go)
	stopping   atomic.Bool           // SIGTERM received: drain whatever the registry says (shutdown.go)
	handOver   atomic.Bool           // stop hands spawned agents to the other nodes (shutdown.go)

	// restoreNotBefore: no schedule instant before it fires (the first
	// start on a restored PostgreSQL database; backup.DetectCopiedDatabase).
	restoreNotBefore time.Time
}

// OpenStore opens the configured store: PostgreSQL when cfg.DatabaseURL is
// set, else SQLite at <DataDir>/kici.db. Migrations are applied.
func OpenStore(ctx context.Context, cfg *config.Config) (store.Store, error) {
	if cfg.DatabaseURL != "" {
		return postgres.Open(ctx, cfg.DatabaseURL)
	}
	return sqlite.Open(ctx, cfg.DatabasePath())
}

// New prepares a server: creates the data directory (0700), opens the store,
// ensures an owner admin token exists in <DataDir>/admin-token (0600), and
// binds the listener. Errors name what failed and what to do; on an error
// everything acquired so far is released (the cleanup stack), so a failed
// start leaves no lock, open database, listener or spawned agent behind.
func New(ctx context.Context, cfg *config.Config, logger *slog.Logger) (_ *Server, err error) {
	if err := prepareDataDir(cfg, logger); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: logger, startedAt: time.Now().UTC()}
	defer func() {
		if err != nil {
			s.cleanup.unwind(context.Background(), logger)
		}
	}()
	// Each step is in build.go, in the order it runs; they hand each
	// other what is not a Server field through p.
	p := &parts{}
	if err := s.openStorage(ctx, p); err != nil {
		return nil, err
	}
	if err := s.openLogsAndSettings(ctx, p); err != nil {
		return nil, err
	}
	if err := s.startScalerAndListener(p); err != nil {
		return nil, err
	}
	if err := s.openServices(ctx, p); err != nil {
		return nil, err
	}
	if err := s.buildCore(ctx, p); err != nil {
		return nil, err
	}
	if err := s.buildForges(p); err != nil {
		return nil, err
	}
	s.buildControl(p)
	s.buildPipeline(p)
	s.connect(p)
	if err := s.buildIngress(ctx, p); err != nil {
		return nil, err
	}
	if err := s.buildHTTP(p); err != nil {
		return nil, err
	}
	s.catchSIGHUP()
	if err := config.WriteLocalEndpoint(cfg.DataDir, p.baseURL, os.Getpid()); err != nil {
		return nil, err
	}
	s.cleanup.push("endpoint file", func(context.Context) error { return config.RemoveLocalEndpoint(cfg.DataDir, os.Getpid()) })
	return s, nil
}

// URL is the base URL the server listens on: https:// with TLS
// (KICI_TLS_CERT_FILE), else http://.
func (s *Server) URL() string { return s.cfg.Scheme() + "://" + s.listener.Addr().String() }

// Run serves until stop is cancelled (SIGTERM), then drains for up to
// KICI_SHUTDOWN_GRACE_MS (no new job handed out, running jobs finish) and
// shuts down gracefully: stop spawned agents (SIGTERM, then SIGKILL after
// 5 s; a job still running is cancelled), stop accepting HTTP, stop the
// pipeline, close agent sockets (static agents fail over), close the
// store.
func (s *Server) Run(stop context.Context) error {
	// The node's loops run on ctx, which outlives stop by the drain before
	// stopping (drainBeforeStop): heartbeats, ingress, run control and the
	// pipeline keep working while running jobs finish.
	ctx, endLoops := context.WithCancel(context.WithoutCancel(stop))
	defer endLoops()
	if s.restored != nil {
		if err := s.restored.EndInFlight(ctx, s.store, s.tracker, s.log); err != nil {
			s.cleanup.unwind(context.Background(), s.log)
			return fmt.Errorf("start on a restored backup: end the jobs in flight at backup time: %w", err)
		}
	}
	if err := s.tracker.Recover(ctx); err != nil {
		s.log.Error("recovery at start failed", "err", err)
	}
	s.node.Join(ctx) // registered, and drained if the cluster is, before dispatching; the other nodes told
	go s.node.Run(ctx)
	s.cleanup.push("node leases", func(ctx context.Context) error { s.releaseLeases(ctx); return nil })
	s.processor.Start(ctx)
	// The dispatcher outlives the signal: agents stopped during shutdown must
	// still be able to report their jobs' final status over their sockets.
	s.dispatcher.Start(context.WithoutCancel(ctx))
	// Agents this node spawned before a restart that died with it: end
	// their jobs now rather than after the stale threshold.
	if lost := s.scaler.LostAgents(); len(lost) > 0 {
		s.log.Warn("agents spawned before the restart are gone; ending their jobs", "agents", lost)
		s.dispatcher.EndLostAgents(ctx, lost)
	}
	s.ingress.start(ctx)
	stopHUP := s.reloadOnSIGHUP()
	defer stopHUP()
	s.runctl.Start(ctx)
	// Unwound in this order: the HTTP server, the agent sockets, the
	// pipeline, then run control's sweeps.
	s.cleanup.pushFunc("run control", s.runctl.Wait)
	s.cleanup.pushFunc("ingest", s.processor.Stop)
	s.cleanup.push("agent sockets", func(ctx context.Context) error { s.dispatcher.Shutdown(ctx); return nil })
	s.cleanup.push("HTTP server", s.httpSrv.Shutdown)
	if s.logArchive != nil {
		go s.logArchive.Run(ctx, s.cfg.LogArchiveAfter, min(logArchiveInterval, max(s.cfg.LogArchiveAfter, time.Second)), jobFinished(s.store), s.log.With("component", "logarchive"))
	}
	go s.resumer.Run(ctx)
	go s.retention.Run(ctx)
	go s.reporter.Run(ctx)
	go s.notifier.Run(ctx)
	go s.blobs.RunSweeper(ctx, BlobSweepInterval)
	// Memory a wave of departed agents leaves behind goes back to the
	// operating system within seconds, not over the runtime's minutes: their
	// heap, and the pages of the binary their sessions ran.
	go (&memtrim.Trimmer{Interval: 2 * time.Second, Log: s.log, AfterTrim: s.releasePagesAfterTrim()}).Run(ctx)

	errc := make(chan error, 1)
	go func() { errc <- s.httpSrv.Serve(s.listener) }()
	s.log.Info("kici-orchestrator listening", "url", s.URL(), "clusterAddress", s.advertisedURL(), "dataDir", s.cfg.DataDir, "store", storeKind(s.cfg))

	var serveErr error
	select {
	case <-stop.Done():
		s.drainBeforeStop(ctx)
	case serveErr = <-errc:
	}
	endLoops()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s.log.Info("shutting down")
	// Agents this orchestrator spawned are stopped first, while their
	// sockets are still served: each cancels its running job and reports it,
	// so no job is left "running" on an agent that no longer exists. When
	// another node lives, those running a job are handed over instead: they
	// reconnect to it once the sockets close and finish their job there.
	s.handOver.Store(serveErr == nil && s.otherLiveNode(shutdownCtx) != "")
	s.stopScaler()
	// Then everything else, last acquired first: the HTTP server, agent
	// sockets, pipeline, run control, leases, endpoint file, cluster bus,
	// step logs, store and data-directory lock.
	s.cleanup.unwind(shutdownCtx, s.log)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

func storeKind(cfg *config.Config) string {
	if cfg.DatabaseURL != "" {
		return "postgres"
	}
	return "sqlite"
}

func bootstrapTokens(cfg *config.Config) []string {
	if cfg.BootstrapAdminToken == "" {
		return nil
	}
	return []string{cfg.BootstrapAdminToken}
}

// ensureAdminTokenFile makes sure <dataDir>/admin-token holds a working owner
// token so kici-admin on this host needs no flags. An existing file is kept.
func ensureAdminTokenFile(ctx context.Context, dataDir string, a *auth.AdminAuth) error {
	path := filepath.Join(dataDir, config.AdminTokenFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	plain, err := a.EnsureOwnerToken(ctx, "bootstrap (local)")
	if err != nil {
		return fmt.Errorf("create bootstrap owner token: %w", err)
	}
	return config.WriteAdminToken(dataDir, plain)
}

// trimReleaseGap is the least time between two releases of the binary's
// pages after memory trims. A bursty server can trim every few seconds;
// each release walks /proc/self/smaps and makes the next passes map back
// what they run (about 12 MB, some 200 faults), and a release that fails
// says so at most this often.
const trimReleaseGap = time.Minute

// releasePagesAfterTrim is the memory trimmer's AfterTrim: it releases the
// binary's pages (package startpages) at most once per trimReleaseGap.
// Called only from the trimmer's goroutine.
func (s *Server) releasePagesAfterTrim() func() {
	log := s.log.With("after", "memory trim")
	var last time.Time
	return func() {
		if !last.IsZero() && time.Since(last) < trimReleaseGap {
			return
		}
		last = time.Now()
		startpages.ReleaseLogged(log, "orchestrator")
	}
}
