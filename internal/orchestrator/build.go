package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/backup"
	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/httpguard"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/jobdata"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/membership"
	"kici.dev/kici/internal/netguard"
	"kici.dev/kici/internal/pieces"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/readiness"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/servermetrics"
	"kici.dev/kici/internal/sourcecache"
	"kici.dev/kici/internal/store"
)

// parts are what New's steps hand each other beyond the Server's own
// fields; each step below fills some and reads those of the steps before.
type parts struct {
	raw       store.Store // the store as opened (migrations, schema version)
	ring      *masterkey.Ring
	st        store.Store // raw with source secrets sealed
	adminAuth *auth.AdminAuth
	agentAuth *auth.AgentAuth
	bs        blobstore.Store
	logs      logstore.Store
	// logCompression follows the cluster for PostgreSQL chunk
	// compression (the heartbeat tells it); nil when the logs are files
	// or KICI_STEP_LOG_COMPRESS=false.
	logCompression *logCompression
	rc             *config.RunControl
	agentBin       string // the agent binary spawned agents run
	settings       *cluster.Reader
	sm             *servermetrics.Metrics
	baseURL        string
	secrets        *secrets.Service
	prov           *provenance.Service
	gate           *approval.Gate
	forges         *ingest.Forges
	guard          *netguard.Guard // source URLs (forge and library clients)
}

// prepareDataDir creates the data directory (0700) and makes an existing
// one private.
func prepareDataDir(cfg *config.Config, logger *slog.Logger) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w (set KICI_DATA_DIR to a writable directory)", cfg.DataDir, err)
	}
	if changed, err := tightenDataDir(cfg.DataDir); err != nil {
		return fmt.Errorf("make data dir %s private (0700): %w", cfg.DataDir, err)
	} else if changed {
		logger.Warn("data directory was accessible to other users; its mode is now 0700", "dataDir", cfg.DataDir)
	}
	return nil
}

// openStorage locks the data directory, detects a start on a restored
// backup, opens the store (source secrets sealed with the master key
// ring), reads the node id and makes sure the owner admin token file
// exists.
func (s *Server) openStorage(ctx context.Context, p *parts) (err error) {
	cfg := s.cfg
	dataLock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	s.cleanup.push("data directory lock", func(context.Context) error { return dataLock.Close() })
	if cfg.DatabaseURL == "" {
		if s.restored, err = backup.DetectMarker(ctx, cfg.DatabasePath()); err != nil {
			return err
		}
	}
	if p.raw, err = OpenStore(ctx, cfg); err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	raw := p.raw
	s.cleanup.push("store", func(context.Context) error { return raw.Close() })
	if cfg.DatabaseURL != "" {
		if s.restored, s.restoreNotBefore, err = backup.DetectCopiedDatabase(ctx, raw, s.log); err != nil {
			return err
		}
	}
	if p.ring, err = loadRing(cfg); err != nil {
		return err
	}
	// Webhook secrets are encrypted at rest like every other secret. The
	// sources webhooks are checked against are kept in memory (package
	// sourcecache): on PostgreSQL while a change to them is heard, on
	// SQLite while the revision its triggers keep has not moved.
	sources := raw
	if cfg.DatabaseURL != "" {
		cache, err := sourcecache.Open(ctx, cfg.DatabaseURL, raw, s.log.With("component", "sourcecache"))
		if err != nil {
			return err
		}
		s.cleanup.pushFunc("source cache", cache.Stop)
		sources = cache
	} else if rev, ok := raw.(sourcecache.RevisionReader); ok {
		sources = sourcecache.NewRevisioned(raw, rev, s.log.With("component", "sourcecache"))
	}
	p.st = secrets.SealSources(sources, p.ring)
	s.store = p.st
	if sr, ok := raw.(readiness.SchemaReader); ok {
		s.dbHealth = readiness.NewDatabase(sr)
	}
	if s.nodeID, err = membership.LoadNodeID(cfg.DataDir); err != nil {
		return err
	}
	p.adminAuth = auth.NewAdminAuth(p.st, bootstrapTokens(cfg))
	return ensureAdminTokenFile(ctx, cfg.DataDir, p.adminAuth)
}

// openLogsAndSettings opens the blob store and the step logs, finds the
// agent binary, reads run control's settings, builds the live cluster settings, the metrics
// registry and retention.
func (s *Server) openLogsAndSettings(ctx context.Context, p *parts) (err error) {
	cfg, logger := s.cfg, s.log
	if p.bs, err = blobstore.FromEnv(os.Getenv, cfg.DataDir); err != nil {
		return err
	}
	sl, err := openStepLogs(ctx, cfg, p.bs, logger.With("component", "logstore"))
	if err != nil {
		return err
	}
	p.logs, s.logArchive, p.logCompression = sl.store, sl.archive, sl.compression
	s.cleanup.pushFunc("step-log store", sl.close)
	p.agentAuth = auth.NewAgentAuth(p.st)
	if p.agentBin, err = config.FindAgentBinary(cfg); err != nil {
		return err
	}
	// Run control is read first: KICI_QUEUE_TIMEOUT_MS is the default of
	// the cluster setting queue_timeout_ms.
	if p.rc, err = config.LoadRunControl(os.Environ()); err != nil {
		return err
	}
	p.settings = cluster.NewReader(p.st, cluster.Defaults{
		cluster.QueueTimeoutMs:          p.rc.QueueTimeout.Milliseconds(),
		cluster.WebhookDedupTTLMs:       cfg.Ingress.WebhookDedupTTL.Milliseconds(),
		cluster.AgentTokenTTLMs:         cfg.AgentTokenTTL.Milliseconds(),
		cluster.DispatchAckTimeoutMs:    cfg.DispatchAckTimeout.Milliseconds(),
		cluster.ScalerSpawnTimeoutMs:    cfg.ScalerSpawnTimeout.Milliseconds(),
		cluster.MaxGithubPayloadBytes:   cfg.Ingress.MaxGitHubPayloadBytes,
		cluster.LockFileMaxBytes:        cfg.Ingress.LockFileMaxBytes,
		cluster.CheckRunTrackingTTLDays: forgeTTLDays(),
	}, cfg.ClusterSettingsCacheTTL, logger.With("component", "cluster-settings"))
	s.metrics = prometheus.NewRegistry()
	p.sm = servermetrics.New(s.metrics)
	if sl.archive != nil {
		servermetrics.RegisterLogArchive(s.metrics, sl.archive)
	}
	s.retention, err = newRetention(p.st, sl.store, cfg.DataDir, s.nodeID, s.metrics, logger.With("component", "retention"))
	return err
}

// startScalerAndListener builds the scaler, then binds the listener (TLS
// when configured) and tells the scaler the agents' URL. The scaler comes
// first: a container scaler creates the agent bridge network, whose
// gateway KICI_HOST may name.
func (s *Server) startScalerAndListener(p *parts) (err error) {
	cfg := s.cfg
	if s.scaler, err = newScaler(cfg, p.agentBin, p.agentAuth, p.settings, p.logs, p.st, s.metrics, s.log.With("component", "scaler")); err != nil {
		return err
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
		return fmt.Errorf("listen on %s:%d: %w (set KICI_PORT to a free port, or 0 for any)", cfg.Host, cfg.Port, err)
	}
	// Closed by the HTTP server's shutdown once serving; closing again is
	// harmless.
	s.cleanup.pushFunc("listener", func() { _ = ln.Close() })
	if ln, err = s.serveTLS(ln); err != nil {
		return err
	}
	s.listener = ln
	p.baseURL = s.URL()
	wsURL := membership.WSURL(p.baseURL)
	if cfg.OrchestratorURL != "" {
		wsURL = cfg.OrchestratorURL
	}
	// The scaler exists before the listener, so it learns the agents' URL
	// here; membership.Node updates it at run time as cluster nodes come
	// and go.
	s.scaler.SetOrchestratorURL(wsURL)
	return s.scaler.CheckContainerReach()
}

// openServices opens the cluster's peers (PostgreSQL only), the secrets
// service, caches and artifacts, and provenance signing.
func (s *Server) openServices(ctx context.Context, p *parts) (err error) {
	cfg, logger := s.cfg, s.log
	if s.peers, err = membership.OpenPeers(ctx, cfg.DatabaseURL, s.nodeID, logger.With("component", "cluster")); err != nil {
		return err
	}
	if s.peers != nil {
		s.cleanup.pushFunc("cluster bus", s.peers.Close)
	}
	if p.secrets, err = setupSecrets(ctx, p.ring, p.st, p.raw, logger.With("component", "secrets")); err != nil {
		return err
	}
	s.blobs = setupBlobs(p.bs, p.st, p.settings, logger.With("component", "blobs"))
	return nil
}

// buildCore builds the tracker and the dispatcher. The tracker comes
// first: dispatch reports the agents' frames to it (runs.JobReports), and
// every component built on it subscribes to its run and job lifecycle
// (runs.Subscriber, subscribe.go). Dispatch-time context flow and fork
// trust: every ready job passes the gate; held work is resumed by the
// resumer.
func (s *Server) buildCore(ctx context.Context, p *parts) error {
	cfg, logger, st := s.cfg, s.log, p.st
	// A listener on every interface signs under this host's reachable
	// address, as the node registry does (advertise.go).
	prov, attester, err := setupProvenance(ctx, cfg, st, membership.ReachableURL(p.baseURL, membership.InterfaceIPs()), logger.With("component", "provenance"))
	if err != nil {
		return err
	}
	p.prov = prov
	p.gate = approval.NewGate(st, trustPolicyFunc(st), logger.With("component", "approval"))
	s.tracker = runs.NewTracker(st, nil, logger.With("component", "runs"), runs.TrackerDeps{Gate: p.gate})
	deps := dispatch.Deps{
		Events:   s.tracker,
		JobData:  jobdata.WithJobCredential(jobdata.NewResolver(st, p.secrets, logger.With("component", "secrets")), s.blobs),
		Attester: attester,
		AckObserver: func(runsOn []string, readyToAck time.Duration) {
			p.sm.DispatchAcked(runsOn, readyToAck)
			s.scaler.AgentTookJob() // a warm agent leaves its pool
		},
	}
	if s.peers != nil {
		deps.Peers, deps.Sessions, deps.NodeID = s.peers, s.peers.Sessions(), s.nodeID
	} else {
		// One node: agent sessions live in its store, so that a restart
		// does not hand an agent id's jobs to whoever registers it first.
		deps.Sessions, deps.NodeID = dispatch.NewStoreSessions(st), s.nodeID
	}
	settings := p.settings
	s.dispatcher = dispatch.New(dispatch.Config{
		AckTimeout:     cfg.DispatchAckTimeout,
		AckTimeoutFunc: func(ctx context.Context) time.Duration { return settings.Duration(ctx, cluster.DispatchAckTimeoutMs) },
		// A static agent has this long to reconnect and reclaim its jobs.
		RecoveryWindow: p.rc.RecoveryWindow,
		// A spawned agent may take the spawn deadline to start, then has a
		// minute to register.
		SpawnTimeout: cfg.ScalerSpawnTimeout + time.Minute,
	}, st, p.agentAuth, p.sm.CountLogs(p.logs), s.scaler, logger.With("component", "dispatch"), deps)
	if s.peers != nil {
		s.peers.Serve(s.dispatcher)
	}
	return nil
}

// buildForges builds the forge clients (never reaching this host unless
// the operator allows it), the forge reporter and the notifier.
func (s *Server) buildForges(p *parts) (err error) {
	cfg, logger, settings := s.cfg, s.log, p.settings
	p.forges = ingest.NewForges(cfg.Ingress.LockFileMaxBytes)
	p.guard = &netguard.Guard{AllowLocal: cfg.Ingress.AllowLocalSourceURLs}
	p.forges.HTTP = p.guard.HTTPClient(30 * time.Second)
	p.forges.Locks.MaxBytesFunc = func(ctx context.Context) int64 { return settings.Int(ctx, cluster.LockFileMaxBytes) }
	if s.reporter, err = setupForgeStatus(p.st, p.forges, p.logs, settings, logger.With("component", "forgestatus")); err != nil {
		return err
	}
	s.notifier, err = setupNotifier(cfg, p.st, p.forges.HTTP, s.nodeID, logger.With("component", "notify"))
	return err
}

// buildControl builds the approval resumer and decider, run control and
// this node's cluster membership.
func (s *Server) buildControl(p *parts) {
	logger, st, rc, settings := s.log, p.st, p.rc, p.settings
	s.resumer = approval.NewResumer(st, s.tracker, p.gate.TrySlot, logger.With("component", "approval"))
	// Held work makes the resumer sweep every second; none, every minute.
	p.gate.OnWaiting(s.resumer.Expect)
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
	s.node = membership.NewNode(membership.NodeConfig{Store: st, ID: s.nodeID, Version: Version, StartedAt: s.startedAt,
		Address: s.advertisedURL, FixedAgentURL: s.cfg.OrchestratorURL, Dispatch: s.dispatcher, Drain: s.runctl, AgentURLs: s.scaler,
		Peers: s.peers, Stopping: s.stopping.Load, CompressedLogs: p.logCompression.setter(), Logger: logger.With("component", "cluster")})
}

// buildPipeline builds the delivery processor (package ingest).
func (s *Server) buildPipeline(p *parts) {
	cfg := s.cfg
	forkIgnored := prometheus.NewCounter(prometheus.CounterOpts{Name: "kici_orch_fork_events_ignored_total",
		Help: "Pull requests from forks dropped because the org's fork policy is ignore."})
	s.metrics.MustRegister(forkIgnored)
	// Run-time library drift: library refs are listed over https, from
	// hosts the source URL guard allows; file libraries only where local
	// source URLs are allowed (a test, or a forge on this host).
	guard := p.guard
	libraries := &pieces.RefResolver{TTL: cfg.Ingress.LibraryRefTTL, CheckURL: func(ctx context.Context, u string) error {
		if strings.HasPrefix(u, "https://") {
			return guard.CheckURL(ctx, "library git URL", u)
		}
		return nil
	}}
	if cfg.Ingress.AllowLocalSourceURLs {
		libraries.Protocols = "file:https"
	}
	s.processor = ingest.NewProcessor(p.st, s.tracker, s.log.With("component", "ingest"), ingest.ProcessorDeps{
		Libraries: libraries,
		Forges:    p.forges,
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
		Outcome:      p.sm.DeliveryFinished,
		// Delivery claims are held under the node id: one node at a time
		// processes a delivery.
		NodeID: s.nodeID,
		// The switch of organization-wide workflows.
		Settings: p.settings,
	})
}

// connect joins the components built above once all of them exist: the
// tracker's subscribers, the scaler's agent registry (warm pools may fill
// from here on) and the metrics read at scrape time.
func (s *Server) connect(p *parts) {
	s.subscribe(p.sm)
	s.scaler.Serve(s.dispatcher)
	p.sm.Wire(s.metrics, p.st, s.dispatcher)
	// Leader, nodes, database, pending deliveries.
	ops := servermetrics.Ops{Store: p.st, AliveWithin: membership.NodeLiveFor, Timeout: readiness.Timeout,
		Leading: func() bool { return s.ingress != nil && s.ingress.sched.Leading() }}
	if s.dbHealth != nil {
		ops.Database = s.dbHealth.Answer
	}
	servermetrics.RegisterOps(s.metrics, ops)
}

// buildIngress builds the webhook ingress and the schedules; on a
// restored backup no schedule instant before the start fires.
func (s *Server) buildIngress(ctx context.Context, p *parts) error {
	ingress, err := setupIngress(ctx, s.cfg, p.st, s.processor, p.settings, s.nodeID, s.log)
	if err != nil {
		return err
	}
	s.ingress = ingress
	if s.restored != nil {
		ingress.sched.NotBefore = s.startedAt
	}
	if s.restoreNotBefore.After(ingress.sched.NotBefore) {
		ingress.sched.NotBefore = s.restoreNotBefore
	}
	return nil
}

// buildHTTP builds the HTTP server: the admin API, the agent socket,
// artifacts, metrics, the webhook routes and the web UI, behind the
// request guard and the metrics.
func (s *Server) buildHTTP(p *parts) error {
	cfg, logger, st := s.cfg, s.log, p.st
	mux := api.NewRouter(api.Deps{
		GitHubHTTP: p.forges.HTTP,
		SourceURLs: p.guard,
		Store:      st,
		Auth:       p.adminAuth,
		Logs:       p.logs,
		Logger:     logger.With("component", "api"),
		Version:    Version,
		Ready:      s.readyFunc(),

		ClusterSettings: p.settings,
		ScalerStatus:    s.scaler.Status,

		RunControl: s.runctl,
		Rerun:      s.processor,
		ManualRuns: s.processor,
		Provenance: p.prov,
		Secrets:    p.secrets,
		Agents:     s.dispatcher,
		Cluster:    s.node,

		Mode:      cfg.Mode,
		Approvals: s.decider,
		Artifacts: s.blobs,
		EmitEvent: s.ingress.emit,
	})
	mux.Handle("GET /ws", s.dispatcher)
	s.blobs.Mount(mux, api.RequestID)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{}))
	s.ingress.mount(mux)
	ui, err := newWebUI(cfg, st, p.adminAuth, p.logs, s, p.settings, logger)
	if err != nil {
		return err
	}
	ui.Mount(mux)
	// Headers within 10 s; bodies at a minimum rate, unauthenticated
	// requests capped (internal/httpguard); idle keep-alive connections
	// closed after 2 min.
	guard := httpguard.New(httpguard.Config{BodyGrace: cfg.RequestBodyGrace})
	s.httpSrv = &http.Server{Handler: guard.Handler(ui.SessionBridge(p.sm.Instrument(mux)), unauthenticatedRequest), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return nil
}

// readyFunc is the admin API's readiness check (readiness.Checker): nil,
// always ready, for a store that cannot report its schema.
func (s *Server) readyFunc() func(context.Context) error {
	if s.dbHealth == nil {
		return nil
	}
	c := &readiness.Checker{DB: s.dbHealth, Draining: s.dispatcher.Draining, Nodes: s.node}
	return c.Ready
}
