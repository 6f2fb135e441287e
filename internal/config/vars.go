package config

import (
	"fmt"
	"sort"
	"strings"

	"kici.dev/kici/internal/suggest"
)

// Var scopes: which program reads a variable.
const (
	// ScopeOrchestrator variables configure kici-orchestrator (parsed by Load).
	ScopeOrchestrator = "orchestrator"
	// ScopeAgent variables configure kici-agent; the orchestrator accepts them
	// so that one shared environment (or a spawned agent's) never aborts it.
	ScopeAgent = "agent"
	// ScopeJob variables are set by the orchestrator in every job's
	// environment (JobDispatch.Env); accepted so that kici can run inside kici.
	ScopeJob = "job"
	// ScopeAdmin variables configure kici-admin.
	ScopeAdmin = "admin"
	// ScopeTest variables configure the test suites.
	ScopeTest = "test"
)

// Var describes one known KICI_* environment variable. Prefix entries (Name
// ending in "*") match every variable starting with the part before the star.
type Var struct {
	// Name is the variable name, e.g. "KICI_PORT", or a prefix such as
	// "KICI_TEST_*".
	Name string
	// Scope is one of the Scope* constants.
	Scope string
	// Default is the value used when the variable is unset, as documented
	// text ("" = no default).
	Default string
	// Meaning is a one-line description (Markdown allowed).
	Meaning string
}

// Vars is the table of every KICI_* variable kici knows, in documentation
// order. Load rejects any KICI_* variable not listed here; docs/configuration.md
// is generated from it (see Markdown).
var Vars = []Var{
	// orchestrator
	{"KICI_DATA_DIR", ScopeOrchestrator, "`/var/lib/kici` if writable, else `$XDG_STATE_HOME/kici` (`~/.local/state/kici`), else `$TMPDIR/kici-data`",
		"Directory for the SQLite database, step logs, agent logs, `admin-token` and `orchestrator.json`; jobs work elsewhere (`KICI_WORK_DIR`). Also read by kici-admin to find a local orchestrator."},
	{"KICI_HOST", ScopeOrchestrator, "`127.0.0.1`",
		"Listen address. KiCI defaults to `0.0.0.0`; kici deliberately listens on loopback only unless told otherwise, because the embedded default has a bootstrap owner token on disk and no TLS. `0.0.0.0` listens on every IPv4 interface only; `::` on every interface of both families."},
	{"KICI_PORT", ScopeOrchestrator, "`4000`", "Listen port (0–65535); `0` picks a free port (the chosen URL is written to `orchestrator.json`)."},
	{"KICI_DATABASE_URL", ScopeOrchestrator, "empty (SQLite at `<data dir>/kici.db`)", "PostgreSQL URL (`postgres://…`); empty selects the embedded SQLite database. The connection pool holds `pool_max_conns` from the URL, else 16 (4 per CPU on larger hosts), and keeps `pool_min_conns` of them open while idle, else up to 16, so that a burst after a quiet spell does not wait for new server processes: a cluster holds 16 connections per node even when idle (`pool_min_conns=0` opens them only on demand; one-off commands such as `kici-admin` and `migrate` keep none). Beside it a node opens up to 17 more connections: the log store up to 8 (no more than `pool_max_conns`), the cluster bus 3, the agent session registry 4 and the source cache 2; count them in the server's `max_connections`."},
	{"KICI_BOOTSTRAP_ADMIN_TOKEN", ScopeOrchestrator, "empty", "An extra admin bearer token accepted with the owner role (in addition to the generated one in `<data dir>/admin-token`)."},
	{"KICI_MODE", ScopeOrchestrator, "`independent`", "Orchestrator mode: `independent`, `observed`, `hybrid` or `platform` (KiCI's names; KiCI defaults to `platform`). The direct GitHub route is served in every mode but `platform`; `observed` refuses to create GitHub-App sources and to start while one exists. There is no Platform connection in this build, so the modes differ only in those ingress rules (docs/ingress.md)."},
	{"KICI_MAX_GITHUB_PAYLOAD_BYTES", ScopeOrchestrator, "`26214400` (25 MiB)", "Body cap of the GitHub webhook route; larger deliveries get 413."},
	{"KICI_LOCK_FILE_MAX_BYTES", ScopeOrchestrator, "`5242880` (5 MiB)", "Size cap of a lock file fetched from a forge; a larger lock is recorded as `lockfile_too_large` and starts nothing."},
	{"KICI_EVENT_LOG_MAX_PAYLOAD_BYTES", ScopeOrchestrator, "`5242880` (5 MiB)", "Largest delivery payload kept (gzipped) in the event log; larger payloads are recorded with `payloadOmittedReason`."},
	{"KICI_WEBHOOK_DEDUP_TTL_MS", ScopeOrchestrator, "`86400000` (24 h)", "Dedup window of webhook delivery ids, in ms (1000 – 365 days): a replay within it is a duplicate, a later one a new delivery; the cluster setting `webhookDedupTtlMs` overrides it live."},
	{"KICI_MAX_AGENTS", ScopeOrchestrator, "`4`", "`maxAgents` of the built-in bare-metal scaler used when `KICI_SCALER_CONFIG_PATH` is unset (≥ 1)."},
	{"KICI_AGENT_BINARY", ScopeOrchestrator, "`kici-agent` beside the orchestrator executable, else on `PATH`", "Path of the kici-agent executable bare-metal scalers spawn (label sets without `binaryPath`)."},
	{"KICI_LOG_LEVEL", ScopeOrchestrator, "`info`", "Log level: `debug`, `info`, `warn` or `error`."},
	{"KICI_LOG_FORMAT", ScopeOrchestrator, "`text`", "Log format of kici-orchestrator and kici-agent: `text` (key=value) or `json` (one JSON object per line, for log collectors)."},
	{"KICI_PPROF_ADDR", ScopeOrchestrator, "empty (none)", "Address of Go's profiling endpoints (`/debug/pprof/`), served on a listener of their own, e.g. `127.0.0.1:6060`. They have no authentication: bind them to loopback. See [performance.md](performance.md)."},
	{"KICI_RUN_RETENTION_DAYS", ScopeOrchestrator, "`90`", "Days a finished run (jobs, steps, queue entries, logs) and a processed delivery or event-log row are kept; `0` keeps them forever."},
	{"KICI_AUDIT_RETENTION_DAYS", ScopeOrchestrator, "`365`", "Days an access-log (audit) entry is kept; `0` keeps it forever."},
	{"KICI_PROVENANCE_RETENTION_DAYS", ScopeOrchestrator, "`365`", "Days a provenance attestation is kept (its run is kept as long); `0` keeps it forever."},
	{"KICI_HELD_RUN_RETENTION_DAYS", ScopeOrchestrator, "`90`", "Days a decided or expired hold is kept; `0` keeps it forever."},
	{"KICI_DISPATCH_QUEUE_TTL_DAYS", ScopeOrchestrator, "`30`", "Days a finished dispatch-queue entry is kept; `0` keeps it forever."},
	{"KICI_SCHEDULE_CATCHUP_WINDOW", ScopeOrchestrator, "`1h`", "How far back a node taking the scheduler lease fires the latest missed instant of each schedule (a Go duration, at most `168h`; `off` disables catch-up); older instants are recorded `missed` in the event log. See [high-availability.md](high-availability.md)."},
	{"KICI_STEP_LOG_STORE", ScopeOrchestrator, "`postgres` when `KICI_DATABASE_URL` is set, else `files`", "Where step logs live: `postgres` (in the database, shared by every orchestrator on it; read and followed through any node) or `files` (under `<data dir>/logs`, this node only). `postgres` needs `KICI_DATABASE_URL`. See [high-availability.md](high-availability.md)."},
	{"KICI_STEP_LOG_MAX_BYTES", ScopeOrchestrator, "`268435456` (256 MiB)", "Per-step cap on stored agent output, in bytes (≥ 65536; `0` = no cap). Past it the step's later output is dropped after one `[kici] log truncated:` line; the step keeps running and its result is not affected. See [logs.md](logs.md)."},
	{"KICI_STEP_LOG_COMPRESS", ScopeOrchestrator, "`true`", "On PostgreSQL (`KICI_STEP_LOG_STORE=postgres`), compress each step-log chunk in the orchestrator (S2) before storing it: a third of the time per append and a fraction of the bytes sent and stored. A node compresses only while every node that heartbeated in the last 10 minutes reads compressed chunks (each node's row in `kici-admin cluster nodes` says whether it does), so during a rolling upgrade from a release before them chunks stay plain until the last old node is restarted as a new one, removed or silent for 10 minutes, and `kici-orchestrator migrate down-to` below the schema that introduced the check rewrites compressed chunks plain ([upgrade.md](upgrade.md)). `false` writes them plain always. Chunks written either way are always read. See [logs.md](logs.md)."},
	{"KICI_LOG_ARCHIVE", ScopeOrchestrator, "`true`", "Move finished step logs into the blob store (`KICI_STORAGE_TYPE`: the data directory or S3) as compressed chunks with an index, removing them from `<data dir>/logs` or PostgreSQL; every reader reads them back unchanged. `false` keeps them where they were written. See [logs.md](logs.md)."},
	{"KICI_LOG_ARCHIVE_AFTER_MS", ScopeOrchestrator, "`60000`", "How long a finished job's step logs must have been quiet before they are archived, in ms; lines arriving after that are refused and counted. See [logs.md](logs.md)."},
	{"KICI_STEP_LOG_TTL_DAYS", ScopeOrchestrator, "`90`", "Days a run's step logs are kept after their last write; `0` keeps them forever."},
	{"KICI_AGENT_LOG_TTL_DAYS", ScopeOrchestrator, "`14`", "Days the output file of an agent this node spawned (`<data dir>/agents/<agentId>.log`) is kept after its last write, once the agent has exited; every node sweeps its own; `0` keeps them forever."},
	{"KICI_DISPATCH_ACK_TIMEOUT_MS", ScopeOrchestrator, "`10000`", "How long an agent has to acknowledge a dispatched job before it is requeued, in ms (≥ 1000); the cluster setting `dispatchAckTimeoutMs` overrides it live."},
	{"KICI_REQUEST_BODY_GRACE_MS", ScopeOrchestrator, "`10000`", "How long any HTTP request body may take before it must keep arriving at 16 KiB/s on average, in ms (≥ 100); a slower body is cut and its connection closed (see [security.md](security.md))."},
	{"KICI_QUEUE_TIMEOUT_MS", ScopeOrchestrator, "`3600000`", "A job queued (no agent took it) longer than this ends `timed_out_stale` with its pending reason as the error, in ms; `0` = never; the cluster setting `queueTimeoutMs` overrides it live."},
	{"KICI_UNROUTABLE_GRACE_MS", ScopeOrchestrator, "`600000`", "A queued job that no connected agent fits and no scaler label set can spawn an agent for (routing reason `unroutable: …`) fails with that reason once it has stayed so this long, in ms; `0` = never (it waits for the queue timeout). KiCI's default is 120 s; kici waits 10 min so a static agent has time to come back. Checked every `KICI_QUEUE_SWEEP_INTERVAL_MS`."},
	{"KICI_QUEUE_SWEEP_INTERVAL_MS", ScopeOrchestrator, "`60000`", "How often the queue timeout is checked, in ms (≥ 100)."},
	{"KICI_STALE_DETECTOR_SCAN_INTERVAL_MS", ScopeOrchestrator, "`60000`", "How often running jobs are checked for stale heartbeats and passed job/run deadlines, in ms (≥ 100)."},
	{"KICI_STALE_DETECTOR_THRESHOLD_MULTIPLIER", ScopeOrchestrator, "`2`", "A running job whose last job heartbeat is older than this × `KICI_JOB_HEARTBEAT_INTERVAL_MS` ends `timed_out_stale`."},
	{"KICI_DEADLINE_GRACE_MS", ScopeOrchestrator, "`60000`", "How long past a job's (or run's) `timeout` the orchestrator waits for the agent before ending the job itself, in ms (≥ 100)."},
	{"KICI_RECOVERY_WINDOW_MS", ScopeOrchestrator, "`120000`", "How long a static agent that disconnected may take to reconnect and reclaim its running jobs before they fail, in ms (≥ 100)."},
	{"KICI_AGENT_TOKEN_TTL_MS", ScopeOrchestrator, "`3600000`", "Lifetime of the ephemeral token minted for each spawned agent, in ms (≥ 1000)."},
	{"KICI_SCALER_CONFIG_PATH", ScopeOrchestrator, "", "Path of `scalers.yaml` (see [scaling.md](scaling.md)); unset ⇒ one built-in bare-metal scaler `local` with `KICI_MAX_AGENTS` agents. SIGHUP reloads it."},
	{"KICI_SCALER_CONFIG_DIR", ScopeOrchestrator, "`scalers.d` beside the config file, if present", "Directory whose `*.yaml`/`*.yml` files add `scalers:` entries, read in name order."},
	{"KICI_SCALER_SPAWN_TIMEOUT_MS", ScopeOrchestrator, "`300000`", "Deadline of one backend spawn (image pull, create, start), in ms (≥ 1000); the cluster setting `scalerSpawnTimeoutMs` overrides it live."},
	{"KICI_CLUSTER_SETTINGS_CACHE_TTL_MS", ScopeOrchestrator, "`10000`", "How long each process caches the cluster settings, in ms."},
	{"KICI_STORAGE_TYPE", ScopeOrchestrator, "`filesystem`", "Blob store of job caches and artifacts: `filesystem` (files under `KICI_STORAGE_FS_PATH`) or `s3` (S3-compatible object storage, for clusters; see [caches-and-artifacts.md](caches-and-artifacts.md))."},
	{"KICI_STORAGE_FS_PATH", ScopeOrchestrator, "`<data dir>/blobs`", "Absolute directory of the filesystem blob store."},
	{"KICI_STORAGE_BUCKET", ScopeOrchestrator, "empty (required for `s3`)", "Bucket of the S3 blob store (it must exist)."},
	{"KICI_STORAGE_PREFIX", ScopeOrchestrator, "empty", "Key prefix of every object in the S3 blob store."},
	{"KICI_STORAGE_REGION", ScopeOrchestrator, "`us-east-1`", "Signing region of the S3 blob store."},
	{"KICI_STORAGE_ENDPOINT", ScopeOrchestrator, "AWS", "Endpoint URL of an S3-compatible server (MinIO, versitygw, Ceph RGW, …)."},
	{"KICI_STORAGE_FORCE_PATH_STYLE", ScopeOrchestrator, "`false`", "`true` ⇒ path-style bucket addressing (`<endpoint>/<bucket>/<key>`), which most self-hosted servers need."},
	{"AWS_ACCESS_KEY_ID", ScopeOrchestrator, "empty", "Access key of the S3 blob store (with `AWS_SECRET_ACCESS_KEY`)."},
	{"KICI_ORCHESTRATOR_URL", ScopeOrchestrator + "," + ScopeAgent, "orchestrator: `ws://127.0.0.1:<port>/ws` (on PostgreSQL: every live node's, its own first); agent: required",
		"WebSocket URL agents dial, or a comma-separated list of the cluster's nodes: kici-agent dials them in turn and moves to the next after a failed dial or a lost connection. The orchestrator passes it to the agents it spawns; unset on a PostgreSQL cluster, spawned agents get every live node's URL from the node registry. See [high-availability.md](high-availability.md)."},
	{"KICI_CLUSTER_ADDRESS", ScopeOrchestrator, "the listener's URL; on `KICI_HOST=0.0.0.0`/`::` this host's first non-loopback IP with the port",
		"Base URL (`http://host:port`) under which other nodes' agents reach this node, recorded in the node registry (KiCI's name). Agents spawned by any node get every live node's address from the registry, so set it when the derived one is not reachable from the other nodes (several interfaces, NAT, a load balancer per node)."},
	{"KICI_SHUTDOWN_GRACE_MS", ScopeOrchestrator, "`10000`", "On SIGTERM (systemd, Docker, Kubernetes) the node drains first: it hands out no new job (they wait in the queue for the other nodes, or for its restart) and waits up to this long, in ms, for the jobs running on its agents to finish; then it stops: its static agents fail over to the other nodes, and the agents it spawned that still run a job are handed over to another live node and finish there (alone, or where they would die with the node, their jobs are cancelled: `agent shutting down`). `0` stops at once. Keep the service manager's stop timeout above it plus 30 s (`TimeoutStopSec`, `docker stop -t`, `terminationGracePeriodSeconds`). See [operations.md](operations.md)."},
	{"KICI_TLS_CERT_FILE", ScopeOrchestrator, "empty (plain HTTP)", "PEM certificate chain the orchestrator serves HTTPS with (and `wss://` to agents), with `KICI_TLS_KEY_FILE`. Both files are read again on SIGHUP and when either changes (checked every 10 s), so a renewed certificate is served from the next connection on without a restart; a pair that does not load is logged and the previous one stays. See [deploy.md](deploy.md)."},
	{"KICI_TLS_KEY_FILE", ScopeOrchestrator, "empty", "PEM private key of `KICI_TLS_CERT_FILE` (set both or neither)."},
	{"KICI_TLS_CA_FILE", ScopeOrchestrator + "," + ScopeAgent + "," + ScopeAdmin, "empty (system roots; orchestrator: its spawned agents get `KICI_TLS_CERT_FILE`)", "PEM CA certificates trusted besides the system roots when dialing an `https://`/`wss://` orchestrator: a private CA or a self-signed certificate. The orchestrator passes it (else its own certificate) to the agents it spawns. Go's `SSL_CERT_FILE` also works, replacing the system roots."},
	{"KICI_AGENT_ENV_*", ScopeOrchestrator, "", "Extra environment for spawned agents: `KICI_AGENT_ENV_X=v` reaches each spawned agent as `X=v` (prefix stripped)."},
	{"KICI_ORCHESTRATOR_PROVENANCE_ISSUER", ScopeOrchestrator, "the orchestrator's own URL on the embedded SQLite default; empty (signing off) with `KICI_DATABASE_URL`", "Issuer URL (`https://…`, or `http://` for loopback hosts) of signed build provenance, the name verifiers pin; with an issuer the orchestrator signs attestations and serves OIDC discovery, its JWKS and the verify endpoint (see [provenance.md](provenance.md)). Set it to the public URL when the orchestrator is reached under another name, and on every node of a PostgreSQL cluster."},
	{"KICI_WEB_SIGNIN_CONFIG", ScopeOrchestrator, "empty (admin tokens only)", "Path of the web UI's sign-in file (YAML or JSON): the OpenID Connect and forge OAuth providers offered on the sign-in page and the `roles` rules mapping people to roles and routing-key scopes (see [web-ui.md](web-ui.md#signing-in-with-an-identity-provider)). Needs `KICI_PUBLIC_URL` (the callback address). Client secrets in it are never logged."},
	{"KICI_PUBLIC_URL", ScopeOrchestrator, "empty (no links)", "Public base URL of this orchestrator (`https://ci.example.com`): check runs and commit statuses link `<url>/ui/runs/{runId}/jobs/{jobId}` as `details_url` / `target_url`; empty leaves the link out (see [forge-status.md](forge-status.md))."},
	{"KICI_CHECK_RUN_TRACKING_TTL_DAYS", ScopeOrchestrator, "`7`", "Days a check-run tracking row is kept after its last update (0 = forever); the cluster setting `checkRunTrackingTtlDays` overrides it live."},
	{"KICI_SMTP_ADDR", ScopeOrchestrator, "empty (no email notifications)", "Mail relay (`host:port`, e.g. `smtp.example.com:587`) that email notification subscriptions are sent through (see [notifications.md](notifications.md))."},
	{"KICI_SMTP_FROM", ScopeOrchestrator, "empty (required with `KICI_SMTP_ADDR`)", "Sender address of notification mail."},
	{"KICI_SMTP_USERNAME", ScopeOrchestrator, "empty (no AUTH)", "User name for SMTP AUTH PLAIN, sent only after STARTTLS."},
	{"KICI_SMTP_PASSWORD", ScopeOrchestrator, "empty", "Password for SMTP AUTH PLAIN."},
	{"KICI_SMTP_STARTTLS", ScopeOrchestrator, "`required`", "`required`: every mail is sent after STARTTLS, verifying the relay's certificate (`KICI_TLS_CA_FILE` adds a private CA), and a relay without STARTTLS is an error; `off`: plain SMTP, for a relay on loopback or a trusted network."},
	{"KICI_SECRET_KEY", ScopeOrchestrator, "empty", "Master key (32 bytes as 64 hex characters or base64) sealing secrets at rest, e.g. provenance signing keys. Wins over `KICI_SECRET_KEY_FILE` and the generated `<data dir>/secret.key`."},
	{"KICI_SECRET_KEY_FILE", ScopeOrchestrator, "`<data dir>/secret.key` (generated, mode 0600)", "File holding the master key, in the `KICI_SECRET_KEY` format."},
	{"KICI_SECRET_KEY_OLD", ScopeOrchestrator, "empty", "Previous master key during a rotation: values it sealed still open until `POST /api/v1/admin/rotate-key` re-encrypts them with `KICI_SECRET_KEY`. Must differ from the current key."},
	{"KICI_SECRET_KEY_FILE_OLD", ScopeOrchestrator, "empty", "File holding the previous master key, in the `KICI_SECRET_KEY` format (alternative to `KICI_SECRET_KEY_OLD`)."},
	{"KICI_ALLOW_LOCAL_SOURCE_URLS", ScopeOrchestrator, "`false`", "`true` ⇒ a source's `apiBaseUrl` (and a universal-git source's http(s) `gitUrlTemplate`) may resolve to a loopback, link-local (`169.254.169.254`) or this host's own address; otherwise such a source is refused at creation and every forge connection to such an address is refused (a forge on the orchestrator's own host, a test's fake forge)."},
	{"KICI_LIBRARY_REF_TTL_MS", ScopeOrchestrator, "`300000`", "How long the run-time library drift check (docs/workflows.md, Libraries) reuses what a library's remote said its ref names, 1000–86400000 ms. `KICI_ALLOW_LOCAL_SOURCE_URLS=true` also lets that check read `file://` and local-path libraries."},

	// agent
	{"KICI_AGENT_ID", ScopeAgent, "`<hostname>-<8 hex>`", "Agent identity (set by the scaler for spawned agents)."},
	{"KICI_AGENT_TOKEN", ScopeAgent, "empty", "Agent token (`kat_…`); empty ⇒ no `auth.request` is sent."},
	{"KICI_AGENT_TOKEN_FD", ScopeAgent, "empty", "Descriptor the agent reads its token from to its end once at start: `0` (standard input, set by the container scaler) or an inherited one ≥ 3, then closed (set by the bare-metal scaler), so the token is not in the agent's environment. Excludes `KICI_AGENT_TOKEN`."},
	{"KICI_AGENT_TOKEN_FILE", ScopeAgent, "empty", "Regular file the agent reads its token from once at start (one trailing newline trimmed; empty, over 4 KiB, several lines or not a regular file is an error), set by the kubernetes scaler to the token key of a Secret it mounts read-only (the agent cannot remove it; the token is never in the pod spec). Excludes `KICI_AGENT_TOKEN` and `KICI_AGENT_TOKEN_FD`."},
	{"KICI_AGENT_JOB_CONTAINER", ScopeAgent, "unset", "`pod` (set by the kubernetes scaler) ⇒ the agent runs inside the job's own container of a Kubernetes pod: a job's `container:` steps run as processes in it (with the container's `env`; `options` are ignored, said in the job log) and its `services:` are the pod's sibling containers, waited for on 127.0.0.1 before the first step. Any other value is refused at start. See docs/kubernetes.md."},
	{"KICI_STEP_USER", ScopeOrchestrator + "," + ScopeAgent, "unset: a uid of each job's own (`KICI_STEP_UID_RANGE`) when the agent runs as root", "Account name or `uid[:gid]` every job's steps run as when the agent runs as root, instead of a uid per job; `kici-step` is created on demand (uid 65532 when no account can be created). `root` keeps steps as root. Set on the orchestrator, it is passed to the bare-metal agents it spawns. See docs/trust-model.md."},
	{"KICI_STEP_UID_RANGE", ScopeOrchestrator + "," + ScopeAgent, "`70000-79999`", "Range (`first-last`) a root agent takes each job's own uid and gid from when `KICI_STEP_USER` is unset: a uid no other live job of the host has (held with a lock file in `/run/kici/step-uids` for the job's life; uids of existing accounts or groups are skipped). Passed on to spawned bare-metal agents. See docs/trust-model.md."},
	{"KICI_STEP_SHARED_PATHS", ScopeOrchestrator + "," + ScopeAgent, "unset", "Colon-separated absolute host directories every job's steps may still read and write in their sandbox, at the same path (everything else of the host is read-only or hidden). Passed on to spawned bare-metal agents."},
	{"KICI_AGENT_HIDE_PATHS", ScopeAgent, "unset (spawned bare-metal agents: the orchestrator's data directory)", "Colon-separated absolute paths a non-root agent hides from its steps where the kernel allows unprivileged user namespaces: each step runs in its own user, mount and PID namespaces, sees these paths as empty read-only directories and a /proc of its own processes only, and untrusted jobs are then allowed."},
	{"KICI_ALLOW_UNCONFINED_STEPS", ScopeOrchestrator + "," + ScopeAgent, "`false`", "`true` ⇒ an agent whose steps run as its own user (not root, or `KICI_STEP_USER=root`) still runs untrusted (fork pull request) jobs; otherwise it fails them with the reason. Passed on to spawned bare-metal agents."},
	{"KICI_LABELS", ScopeAgent, "empty", "Comma-separated routing labels (the `kici:` prefix is reserved for auto labels)."},
	{"KICI_MAX_LOG_SIZE_BYTES", ScopeAgent, "`10485760`", "Per-step log cap in bytes (a value in the dispatch wins)."},
	{"KICI_DEFAULT_STEP_TIMEOUT_MS", ScopeAgent, "`1800000`", "Step timeout when the step sets none, in ms."},
	{"KICI_JOB_HEARTBEAT_INTERVAL_MS", ScopeOrchestrator + "," + ScopeAgent, "`60000`", "Interval of per-job heartbeats, in ms (agent: how often it sends them; orchestrator: the base of the stale threshold)."},
	{"KICI_SCALER_MANAGED", ScopeAgent, "`false`", "`true` ⇒ the agent runs one job then exits (set by the scaler)."},
	{"KICI_SCALER_IDLE_TIMEOUT", ScopeAgent, "`5000`", "How long a scaler-managed agent waits for follow-up work after its job, in ms."},
	{"KICI_SCALER_PENDING_DISPATCH_TIMEOUT", ScopeAgent, "`60000`", "How long a scaler-managed agent waits for its bound job when `register.ack` says `pendingDispatch`, in ms."},
	{"KICI_AGENT_JOB_HOME", ScopeOrchestrator + "," + ScopeAgent, "`false`", "`true` ⇒ each job gets a fresh, empty `HOME` inside its work directory (always so when the agent runs as root, where each job has its own uid, and where a non-root agent confines steps in user namespaces) and the host's `GOPATH`, `GOCACHE`, `GOMODCACHE` are not passed on, so jobs share nothing through a home directory (carry build state with `cache:`). The orchestrator passes it to the bare-metal agents it spawns."},
	{"KICI_WORK_DIR", ScopeOrchestrator + "," + ScopeAgent, "orchestrator: `<os temp dir>/kici-work-<uid>`; agent: the OS temp dir", "Parent directory of the per-job work directories (orchestrator: of the bare-metal agents it spawns; absolute, created 0700, refused when not owned by this user, group/world-writable or inside the data directory)."},

	// job environment
	{"KICI_RUN_ID", ScopeJob, "", "Run id of the job."},
	{"KICI_JOB_ID", ScopeJob, "", "Job id."},
	{"KICI_JOB_NAME", ScopeJob, "", "Job (matrix leg) name."},
	{"KICI_WORKFLOW_NAME", ScopeJob, "", "Workflow name."},
	{"KICI_REPO", ScopeJob, "", "Repository identifier (`<org>/<name>`)."},
	{"KICI_REF", ScopeJob, "", "Git ref of the triggering event."},
	{"KICI_SHA", ScopeJob, "", "Commit SHA being built."},
	{"KICI_ORG_ID", ScopeJob, "", "Organisation id of the source."},
	{"KICI_WORKSPACE", ScopeJob, "", "Checkout directory of the job: `<work root>/kici-job-<job name>-<hash>/src`, the same path for every run of the job on that work root, unless that name is taken (another run of the job at work, or something the agent may not remove; [caches-and-artifacts.md](caches-and-artifacts.md#per-job-home))."},
	{"KICI_MATRIX_*", ScopeJob, "", "One variable per matrix value, key upper-cased (`KICI_MATRIX_GO`)."},
	{"KICI_INPUT_*", ScopeJob, "", "One variable per input of a manual or scheduled run, name upper-cased (`KICI_INPUT_TARGET`); booleans `true`/`false`."},
	{"KICI_OUTPUT", ScopeJob, "", "File a step appends `key=value` (or `key<<DELIM` … `DELIM`) output lines to; see docs/workflows.md#outputs."},
	{"KICI_ATTEST_SOCKET", ScopeJob, "", "Set by the agent in each step when attestation is available: the running job's attestation channel (used by `kici-agent attest`)."},
	{"KICI_ATTEST_TOKEN", ScopeJob, "", "Set by the agent with `KICI_ATTEST_SOCKET`: the per-job secret of that channel."},

	// admin CLI
	{"KICI_ADMIN_URL", ScopeAdmin, "the URL in `<data dir>/orchestrator.json`", "Orchestrator base URL for kici-admin (`--url`)."},
	{"KICI_ADMIN_TOKEN", ScopeAdmin, "the token in `<data dir>/admin-token` (local orchestrator only)", "Admin bearer token for kici-admin (`--token`)."},

	// tests
	{"KICI_TEST_*", ScopeTest, "", "Test-suite settings, e.g. `KICI_TEST_DATABASE_URL` (admin URL of a PostgreSQL server used by the store tests)."},
}

// lookupVar returns the table entry matching name (exact or prefix).
func lookupVar(name string) (Var, bool) {
	for _, v := range Vars {
		if p, ok := strings.CutSuffix(v.Name, "*"); ok {
			if strings.HasPrefix(name, p) && len(name) > len(p) {
				return v, true
			}
			continue
		}
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// KnownNames returns the names in Vars (prefixes keep their "*"), sorted.
func KnownNames() []string {
	names := make([]string, 0, len(Vars))
	for _, v := range Vars {
		names = append(names, v.Name)
	}
	sort.Strings(names)
	return names
}

// unknownVarError builds the "unknown environment variable" error for name,
// with a "did you mean" suggestion when a known name is close.
func unknownVarError(name string) error {
	known := KnownNames()
	msg := fmt.Sprintf("unknown environment variable %s (known: %s", name, strings.Join(known, ", "))
	if s := closestVar(name, known); s != "" {
		msg += "; did you mean " + s + "?"
	}
	return fmt.Errorf("%s)", msg)
}

// closestVar returns the known name closest to name by edit distance, or "" when
// none is close enough (distance ≤ max(2, len(name)/4)).
func closestVar(name string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		if strings.HasSuffix(k, "*") {
			continue
		}
		d := suggest.Distance(name, k)
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	limit := max(2, len(name)/4)
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// Markdown renders the configuration reference (docs/configuration.md) from
// Vars.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# kici configuration\n\n")
	b.WriteString("<!-- Generated from internal/config/vars.go by `go test ./internal/config -run TestConfigurationDoc -update`. Do not edit by hand. -->\n\n")
	b.WriteString("kici is configured with `KICI_*` environment variables (KiCI's names). ")
	b.WriteString("Any `KICI_*` variable not listed below makes `kici-orchestrator` refuse to start, naming the variable and the closest known name, so that a typo never silently falls back to a default. ")
	b.WriteString("Agent-side, job and admin variables are listed (and accepted by the orchestrator) so that one shared environment works for every kici program.\n\n")
	b.WriteString("Deliberate departure from KiCI: `KICI_HOST` defaults to `127.0.0.1` (KiCI: `0.0.0.0`). ")
	b.WriteString("Set `KICI_HOST=0.0.0.0` to accept connections from other hosts.\n\n")
	sections := []struct{ scope, title string }{
		{ScopeOrchestrator, "Orchestrator"},
		{ScopeAgent, "Agent"},
		{ScopeJob, "Job environment (set by the orchestrator for every job)"},
		{ScopeAdmin, "kici-admin"},
		{ScopeTest, "Tests"},
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "## %s\n\n| Variable | Default | Meaning |\n|---|---|---|\n", s.title)
		for _, v := range Vars {
			if strings.Split(v.Scope, ",")[0] != s.scope {
				continue
			}
			def := v.Default
			if def == "" {
				def = "—"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, v.Meaning)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Files in the data directory\n\n")
	b.WriteString("| File | Mode | Content |\n|---|---|---|\n")
	b.WriteString("| `admin-token` | 0600 | Plaintext of the bootstrap owner token (`kadm_…`), created at first start. |\n")
	b.WriteString("| `orchestrator.json` | 0600 | `{\"url\":\"http://127.0.0.1:4000\",\"pid\":123}`, written after the listener is up; kici-admin reads it when `--url` is not given. |\n")
	b.WriteString("| `kici.db` | 0600 | SQLite database (when `KICI_DATABASE_URL` is empty), with `kici.db-wal` and `kici.db-shm` beside it while it is open: the orchestrator copies the write-ahead log back into `kici.db` a quarter of a second after writes, in the background; after a burst of writes `kici.db-wal` keeps the largest size it reached (typically tens of MB) until the orchestrator stops. |\n")
	return b.String()
}
