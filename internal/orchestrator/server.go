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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kici.dev/kici/internal/approval"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/clusterbus"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/forgestatus"
	"kici.dev/kici/internal/httpguard"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/jobblobs"
	"kici.dev/kici/internal/memtrim"
	"kici.dev/kici/internal/netguard"
	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/pieces"
	"kici.dev/kici/internal/retention"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/secrets"
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
	restored   *restoreStart
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
	drainMu    sync.Mutex            // drain changes vs heartbeats (nodes.go)
	cleanup    cleanupStack          // every acquired resource, released last first (cleanup.go)
	stopScaler func()                // stops spawned agents once (Run calls it first)
	peers      *peers                // the other nodes of a cluster; nil on SQLite (peers.go)
	hup        chan os.Signal        // SIGHUPs caught since New (scaling.go)
	dbHealth   *dbHealth             // database round trips for /ready and /metrics (readiness.go)
	tls        *tlsconf.Reloader     // the served certificate; nil without TLS (tls.go)
	stopping   atomic.Bool           // SIGTERM received: drain whatever the registry says (shutdown.go)
	handOver   atomic.Bool           // stop hands spawned agents to the other nodes (shutdown.go)

	// restoreNotBefore: no schedule instant before it fires (the first
	// start on a restored PostgreSQL database; restore.go).
	restoreNotBefore time.Time
}

// OpenStore opens the configured store: PostgreSQL when cfg.DatabaseURL is
// set, else SQLite at <DataDir>/kici.db. Migrations are applied.
func OpenStore(ctx context.Context, cfg *config.Config) (store.Store, error) {
	if cfg.DatabaseURL != "" {
		return postgres.Open(ctx, cfg.DatabaseURL)
	}
	return sqlite.Open(ctx, sqlitePath(cfg.DataDir))
}

// New prepares a server: creates the data directory (0700), opens the store,
// ensures an owner admin token exists in <DataDir>/admin-token (0600), and
// binds the listener. Errors name what failed and what to do; on an error
// everything acquired so far is released (the cleanup stack), so a failed
// start leaves no lock, open database, listener or spawned agent behind.
func New(ctx context.Context, cfg *config.Config, logger *slog.Logger) (_ *Server, err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w (set KICI_DATA_DIR to a writable directory)", cfg.DataDir, err)
	}
	if changed, err := tightenDataDir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("make data dir %s private (0700): %w", cfg.DataDir, err)
	} else if changed {
		logger.Warn("data directory was accessible to other users; its mode is now 0700", "dataDir", cfg.DataDir)
	}
	s := &Server{cfg: cfg, log: logger, startedAt: time.Now().UTC()}
	defer func() {
		if err != nil {
			s.cleanup.unwind(context.Background(), logger)
		}
	}()
	dataLock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s.cleanup.push("data directory lock", func(context.Context) error { return dataLock.Close() })
	if cfg.DatabaseURL == "" {
		if s.restored, err = detectRestore(ctx, sqlitePath(cfg.DataDir)); err != nil {
			return nil, err
		}
	}
	raw, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s.cleanup.push("store", func(context.Context) error { return raw.Close() })
	if cfg.DatabaseURL != "" {
		if s.restored, s.restoreNotBefore, err = detectCopiedDatabase(ctx, raw, logger); err != nil {
			return nil, err
		}
	}
	ring, err := loadRing(cfg)
	if err != nil {
		return nil, err
	}
	// Webhook secrets are encrypted at rest like every other secret.
	st := secrets.SealSources(raw, ring)
	s.store = st
	if sr, ok := raw.(schemaReader); ok {
		s.dbHealth = &dbHealth{db: sr}
	}
	if s.nodeID, err = nodeID(cfg.DataDir); err != nil {
		return nil, err
	}

	adminAuth := auth.NewAdminAuth(st, bootstrapTokens(cfg))
	if err := ensureAdminTokenFile(ctx, cfg.DataDir, adminAuth); err != nil {
		return nil, err
	}

	bs, err := blobstore.FromEnv(os.Getenv, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	logs, archive, closeLogs, err := openStepLogs(ctx, cfg, bs, logger.With("component", "logstore"))
	if err != nil {
		return nil, err
	}
	s.logArchive = archive
	s.cleanup.pushFunc("step-log store", closeLogs)
	agentAuth := auth.NewAgentAuth(st)
	agentBinary, err := config.FindAgentBinary(cfg)
	if err != nil {
		return nil, err
	}
	// Run control is read first: KICI_QUEUE_TIMEOUT_MS is the default of
	// the cluster setting queue_timeout_ms.
	rc, err := config.LoadRunControl(os.Environ())
	if err != nil {
		return nil, err
	}
	// The scaler is built before the listener: a container scaler creates
	// the agent bridge network, whose gateway KICI_HOST may name.
	settings := cluster.NewReader(st, cluster.Defaults{
		cluster.QueueTimeoutMs:          rc.QueueTimeout.Milliseconds(),
		cluster.WebhookDedupTTLMs:       cfg.Ingress.WebhookDedupTTL.Milliseconds(),
		cluster.AgentTokenTTLMs:         cfg.AgentTokenTTL.Milliseconds(),
		cluster.DispatchAckTimeoutMs:    cfg.DispatchAckTimeout.Milliseconds(),
		cluster.ScalerSpawnTimeoutMs:    cfg.ScalerSpawnTimeout.Milliseconds(),
		cluster.MaxGithubPayloadBytes:   cfg.Ingress.MaxGitHubPayloadBytes,
		cluster.LockFileMaxBytes:        cfg.Ingress.LockFileMaxBytes,
		cluster.CheckRunTrackingTTLDays: forgeTTLDays(),
	}, cfg.ClusterSettingsCacheTTL, logger.With("component", "cluster-settings"))
	s.metrics = prometheus.NewRegistry()
	sm := newServerMetrics(s.metrics)
	if archive != nil {
		registerLogArchiveMetrics(s.metrics, archive)
	}
	if s.retention, err = newRetention(st, logs, cfg.DataDir, s.nodeID, s.metrics, logger.With("component", "retention")); err != nil {
		return nil, err
	}
	cyc := &cycles{} // forwarders between components that need each other (cycles.go)
	if s.scaler, err = newScaler(cfg, agentBinary, agentAuth, settings, logs, s.metrics, cyc, logger.With("component", "scaler")); err != nil {
		return nil, err
	}
	// The scaler may hold spawned agents and a warm-pool loop from here on;
	// Run stops it first (its agents report over live sockets), the stack
	// otherwise.
	s.stopScaler = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		s.shutdownScaler(ctx) // shutdown.go: hands spawned agents over when it can
	})
	s.cleanup.pushFunc("scaler", s.stopScaler)

	ln, err := net.Listen(listenNetwork(cfg.Host), net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s:%d: %w (set KICI_PORT to a free port, or 0 for any)", cfg.Host, cfg.Port, err)
	}
	// Closed by the HTTP server's shutdown once serving; closing again is
	// harmless.
	s.cleanup.pushFunc("listener", func() { _ = ln.Close() })
	if ln, err = s.serveTLS(ln); err != nil {
		return nil, err
	}
	s.listener = ln
	baseURL := s.URL()
	wsURL := wsURLOf(baseURL)

	if cfg.OrchestratorURL != "" {
		wsURL = cfg.OrchestratorURL
	}
	// The scaler exists before the listener, so it learns the agents' URL
	// here; nodes.go updates it at run time as cluster nodes come and go.
	s.scaler.SetOrchestratorURL(wsURL)
	if err := s.scaler.CheckContainerReach(); err != nil {
		return nil, err
	}
	if s.peers, err = setupPeers(ctx, cfg, s.nodeID, logger.With("component", "cluster")); err != nil {
		return nil, err
	}
	if s.peers != nil {
		s.cleanup.pushFunc("cluster bus", s.peers.Close)
	}
	secretSvc, err := setupSecrets(ctx, ring, st, raw, logger.With("component", "secrets"))
	if err != nil {
		return nil, err
	}
	s.blobs = setupBlobs(bs, st, settings, logger.With("component", "blobs"))
	// A listener on every interface signs under this host's reachable
	// address, as the node registry does (advertise.go).
	prov, provAttester, err := setupProvenance(ctx, cfg, st, reachableURL(baseURL, interfaceIPs()), logger.With("component", "provenance"))
	if err != nil {
		return nil, err
	}
	deps := dispatch.Deps{
		Events:   jobEvents{cyc},
		JobData:  withJobCredential(jobDataResolver(st, secretSvc, logger.With("component", "secrets")), s.blobs),
		Attester: provAttester,
		AckObserver: func(runsOn []string, readyToAck time.Duration) {
			sm.dispatchAcked(runsOn, readyToAck)
			s.scaler.AgentTookJob() // a warm agent leaves its pool
		},
	}
	if s.peers != nil {
		deps.Peers, deps.Sessions, deps.NodeID = s.peers, s.peers.sessions, s.nodeID
	} else {
		// One node: agent sessions live in its store, so that a restart
		// does not hand an agent id's jobs to whoever registers it first.
		deps.Sessions, deps.NodeID = dispatch.NewStoreSessions(st), s.nodeID
	}
	s.dispatcher = dispatch.New(dispatch.Config{
		AckTimeout:     cfg.DispatchAckTimeout,
		AckTimeoutFunc: func(ctx context.Context) time.Duration { return settings.Duration(ctx, cluster.DispatchAckTimeoutMs) },
		// A static agent has this long to reconnect and reclaim its jobs.
		RecoveryWindow: rc.RecoveryWindow,
		// A spawned agent may take the spawn deadline to start, then has a
		// minute to register.
		SpawnTimeout: cfg.ScalerSpawnTimeout + time.Minute,
	}, st, agentAuth, countedLogs{LogSink: logs, m: sm}, s.scaler, logger.With("component", "dispatch"), deps)
	if s.peers != nil {
		s.peers.serve(s.dispatcher)
		s.peers.bus.Handle(msgDrainChanged, func(m clusterbus.Message) { s.onDrainChanged(s.peers.ctx, m.Body) })
	}
	forges := ingest.NewForges(cfg.Ingress.LockFileMaxBytes)
	// Forge clients never reach this host unless the operator allows it.
	sourceURLs := &netguard.Guard{AllowLocal: cfg.Ingress.AllowLocalSourceURLs}
	forges.HTTP = sourceURLs.HTTPClient(30 * time.Second)
	forges.Locks.MaxBytesFunc = func(ctx context.Context) int64 { return settings.Int(ctx, cluster.LockFileMaxBytes) }
	if s.reporter, err = setupForgeStatus(st, forges, logs, settings, logger.With("component", "forgestatus")); err != nil {
		return nil, err
	}
	reporter := s.reporter // told of every finished job (its check runs)
	if s.notifier, err = setupNotifier(cfg, st, forges.HTTP, s.nodeID, logger.With("component", "notify")); err != nil {
		return nil, err
	}
	// Dispatch-time context flow and fork trust: every ready job passes
	// the gate; held work is resumed by the resumer.
	gate := approval.NewGate(st, trustPolicyFunc(st), logger.With("component", "approval"))
	s.tracker = runs.NewTracker(st, &kickOnEnqueue{Enqueuer: s.dispatcher, reporter: s.reporter, peers: s.peers},
		logger.With("component", "execution"), runs.TrackerDeps{Gate: gate, Admitter: admitter{cyc},
			RunFinished: cyc.runFinished(sm),
			JobFinished: []func(*store.Job){sm.jobFinished, cyc.jobFinished, func(*store.Job) { reporter.Kick() }}})
	s.resumer = approval.NewResumer(st, s.tracker, gate.TrySlot, logger.With("component", "approval"))
	s.decider = approval.NewDecider(st, s.resumer.Kick)
	queueTimeout := rc.QueueTimeout
	if queueTimeout == 0 {
		queueTimeout = -1 // KICI_QUEUE_TIMEOUT_MS=0: never
	}
	s.runctl = runctl.New(runctl.Config{QueueTimeout: queueTimeout, QueueSweepInterval: rc.QueueSweepInterval, UnroutableGrace: rc.UnroutableGrace,
		ScanInterval: rc.ScanInterval, StaleThreshold: rc.StaleThreshold(), DeadlineGrace: rc.DeadlineGrace,
		// The live cluster setting queue_timeout_ms, read on every sweep.
		QueueTimeoutFunc: func(ctx context.Context) time.Duration { return settings.Duration(ctx, cluster.QueueTimeoutMs) }},
		st, s.dispatcher, s.tracker, logger.With("component", "runctl"))
	forkIgnored := prometheus.NewCounter(prometheus.CounterOpts{Name: "kici_orch_fork_events_ignored_total",
		Help: "Pull requests from forks dropped because the org's fork policy is ignore."})
	s.metrics.MustRegister(forkIgnored)
	// Run-time library drift: library refs are listed over https, from
	// hosts the source URL guard allows; file libraries only where local
	// source URLs are allowed (a test, or a forge on this host).
	libraries := &pieces.RefResolver{TTL: cfg.Ingress.LibraryRefTTL, CheckURL: func(ctx context.Context, u string) error {
		if strings.HasPrefix(u, "https://") {
			return sourceURLs.CheckURL(ctx, "library git URL", u)
		}
		return nil
	}}
	if cfg.Ingress.AllowLocalSourceURLs {
		libraries.Protocols = "file:https"
	}
	s.processor = ingest.NewProcessor(st, s.tracker, logger.With("component", "pipeline"), ingest.ProcessorDeps{
		Libraries: libraries,
		Forges:    forges,
		// Workflow concurrency groups: recorded at run creation, admitted
		// by the tracker before any job is released, released when a run
		// ends.
		Concurrency: s.runctl,
		// `/kici approve|reject <runId>` pull-request comments, answered on
		// the forge.
		Decider: s.decider.Decide,
		Replier: s.reporter.Reply,
		// A refused GitHub "Re-run" shows as a neutral check on its commit.
		RerunRefused: s.reporter.RerunRefused,
		ForkIgnored:  forkIgnored.Inc,
		Outcome:      sm.deliveryFinished,
		// Delivery claims are held under the node id: one node at a time
		// processes a delivery.
		NodeID: s.nodeID,
		// The switch of organization-wide workflows.
		Settings: settings,
	})
	// The one late binding of the wiring (cycles.go): every component the
	// forwarders handed out above reach now exists; warm pools may fill
	// from here on.
	cyc.bind(s.tracker, s.dispatcher, s.runctl, s.resumer, s.processor)
	s.scaler.RefillWarmPools()
	sm.wire(s.metrics, st, s.dispatcher)
	ingress, err := setupIngress(ctx, cfg, st, s.processor, settings, s.nodeID, logger)
	if err != nil {
		return nil, err
	}
	s.ingress = ingress
	if s.restored != nil {
		ingress.sched.NotBefore = s.startedAt
	}
	if s.restoreNotBefore.After(ingress.sched.NotBefore) {
		ingress.sched.NotBefore = s.restoreNotBefore
	}
	s.metrics.MustRegister(opsCollector{s}) // leader, nodes, database, pending deliveries (opsmetrics.go)

	mux := api.NewRouter(api.Deps{
		GitHubHTTP: forges.HTTP,
		SourceURLs: sourceURLs,
		Store:      st,
		Auth:       adminAuth,
		Logs:       logs,
		Logger:     logger.With("component", "api"),
		Version:    Version,
		Ready:      s.readyFunc(),

		ClusterSettings: settings,
		ScalerStatus:    func() scaler.Status { return scalerStatus(s.scaler, s.dispatcher.Agents()) },

		RunControl: s.runctl,
		Rerun:      s.processor,
		ManualRuns: s.processor,
		Provenance: prov,
		Secrets:    secretSvc,
		Agents:     s.dispatcher,
		Cluster:    clusterNodes{s},

		Mode:      cfg.Mode,
		Approvals: s.decider,
		Artifacts: s.blobs,
		EmitEvent: ingress.emit,
	})
	mux.Handle("GET /ws", s.dispatcher)
	s.blobs.Mount(mux, api.RequestID)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{}))
	ingress.mount(mux)
	ui, err := newWebUI(cfg, st, adminAuth, logs, s, settings, logger)
	if err != nil {
		return nil, err
	}
	ui.Mount(mux)
	// Headers within 10 s; bodies at a minimum rate, unauthenticated
	// requests capped (internal/httpguard); idle keep-alive connections
	// closed after 2 min.
	guard := httpguard.New(httpguard.Config{BodyGrace: cfg.RequestBodyGrace})
	s.httpSrv = &http.Server{Handler: guard.Handler(ui.SessionBridge(sm.instrument(mux)), unauthenticatedRequest), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}

	s.catchSIGHUP()
	if err := config.WriteLocalEndpoint(cfg.DataDir, baseURL, os.Getpid()); err != nil {
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
		if err := s.endInFlight(ctx, s.restored); err != nil {
			s.cleanup.unwind(context.Background(), s.log)
			return fmt.Errorf("start on a restored backup: end the jobs in flight at backup time: %w", err)
		}
	}
	if err := s.tracker.Recover(ctx); err != nil {
		s.log.Error("recovery at start failed", "err", err)
	}
	s.heartbeat(ctx) // registered, and drained if the cluster is, before dispatching
	go s.runHeartbeat(ctx)
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
	s.cleanup.pushFunc("pipeline", s.processor.Stop)
	s.cleanup.push("agent sockets", func(ctx context.Context) error { s.dispatcher.Shutdown(ctx); return nil })
	s.cleanup.push("HTTP server", s.httpSrv.Shutdown)
	if s.logArchive != nil {
		go runLogArchive(ctx, s.logArchive, s.store, s.cfg.LogArchiveAfter, min(logArchiveInterval, max(s.cfg.LogArchiveAfter, time.Second)), s.log.With("component", "logarchive"))
	}
	go s.resumer.Run(ctx)
	go s.retention.Run(ctx)
	go s.reporter.Run(ctx)
	go s.notifier.Run(ctx)
	go s.blobs.RunSweeper(ctx, BlobSweepInterval)
	// Memory a wave of departed agents leaves behind goes back to the
	// operating system within seconds, not over the runtime's minutes.
	go (&memtrim.Trimmer{Interval: 2 * time.Second, Log: s.log}).Run(ctx)

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
