// Command kici-orchestrator is kici's server: webhook ingress, trigger
// matching, run tracking, job dispatch to agents over WebSocket, the embedded
// process auto-scaler and the admin API.
//
// With no configuration it runs the embedded default: SQLite and logs in the
// data directory, a bootstrap owner token in <data>/admin-token, and
// kici-agent processes spawned on this host. Configuration is by KICI_*
// environment variables; see docs/configuration.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/hardening"
	"kici.dev/kici/internal/healthcheck"
	"kici.dev/kici/internal/orchestrator"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/startpages"
	"kici.dev/kici/internal/tlsconf"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "-h", "--help", "help":
			fmt.Print(usage)
			return
		case "version", "--version":
			fmt.Println("kici-orchestrator", orchestrator.Version)
			return
		case "healthcheck":
			os.Exit(healthCheck(os.Args[2:]))
		case "admin":
			os.Exit(admin(os.Args[2:]))
		case "migrate":
			os.Exit(migrate(os.Args[2:], os.Stdout, os.Stderr))
		case scaler.RelayArg:
			os.Exit(scaler.Relay(os.Args[2:]))
		default:
			fmt.Fprintf(os.Stderr, "kici-orchestrator: unknown argument %q\n\n%s", os.Args[1], usage)
			os.Exit(2)
		}
	}
	cfg, err := config.Load(os.Environ())
	if err != nil {
		fatal(err)
		os.Exit(2)
	}
	handler, err := config.LogHandler(os.Environ(), os.Stderr, cfg.SlogLevel())
	if err != nil {
		fatal(err)
		os.Exit(2)
	}
	logger := slog.New(handler)
	if err := servePprof(logger); err != nil {
		fatal(err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := hardening.NoDump(); err != nil {
		logger.Warn("could not mark the orchestrator process non-dumpable", "err", err)
	}
	srv, err := orchestrator.New(ctx, cfg, logger)
	if err != nil {
		fatal(err)
		os.Exit(1)
	}
	// Everything is read (New loads the master keys from the environment):
	// no child process inherits a credential from here on. The initial
	// block at /proc/<pid>/environ is unchanged; see docs/trust-model.md.
	for _, k := range config.SensitiveEnv(os.Environ()) {
		os.Unsetenv(k)
	}
	// The process's start-up is over (configuration, keys, migrations,
	// every package's initialisation): the pages of the binary it touched
	// need not stay mapped (package startpages).
	startpages.ReleaseLogged(logger, "orchestrator")
	// The node's start-up follows in Run: recovery, joining the cluster
	// and the first pass of every background loop (its leases, the look
	// back for outcomes missed while down) touch code and tables that no
	// later pass touches. Release once more when they are done.
	settled := time.AfterFunc(nodeStartupSettle, func() { startpages.ReleaseLogged(logger.With("after", "node start-up"), "orchestrator") })
	defer settled.Stop()
	if err := srv.Run(ctx); err != nil {
		fatal(err)
		os.Exit(1)
	}
}

// nodeStartupSettle is how long after Run is called the binary's pages are
// released a second time. On an idle start the background loops' first
// passes are over within a few seconds. On a slow one (a long recovery) the
// release comes before they end, which costs nothing but its use: a page
// released while still in use is mapped back from the page cache at its
// next touch, 64 KB per fault.
const nodeStartupSettle = 5 * time.Second

// fatal reports why the server cannot start or stopped, on stderr in the
// log format KICI_LOG_FORMAT selects (a JSON record with json).
func fatal(err error) {
	config.Fatal(os.Environ(), os.Stderr, "kici-orchestrator", err)
}

// healthCheck probes the server this environment configures (KICI_HOST,
// KICI_PORT, through loopback for a wildcard address; with KICI_PORT=0 the
// URL in orchestrator.json) or --url, and returns
// the exit status: 0 healthy, 1 not, 2 bad usage.
func healthCheck(args []string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	ready := fs.Bool("ready", false, "probe /ready (the database too) instead of /health")
	base := fs.String("url", "", "base URL of the orchestrator (default: from KICI_HOST and KICI_PORT)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: kici-orchestrator healthcheck [--ready] [--url URL]\n\n"+
			"Probes the orchestrator's /health (or /ready) endpoint, for a container HEALTHCHECK or a monitor.\n"+
			"Exit status: 0 healthy, 1 unhealthy or unreachable, 2 bad usage.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kici-orchestrator healthcheck: unexpected argument %q (see --help)\n", fs.Arg(0))
		return 2
	}
	if *base == "" {
		cfg, err := config.Load(os.Environ())
		if err != nil {
			fmt.Fprintln(os.Stderr, "kici-orchestrator healthcheck:", err)
			return 2
		}
		*base = healthcheck.LocalURL(cfg.Host, cfg.Port)
		if cfg.Port == 0 { // a free port was picked: the server wrote it down
			b, err := os.ReadFile(filepath.Join(cfg.DataDir, config.EndpointFile))
			var ep config.Endpoint
			if err != nil || json.Unmarshal(b, &ep) != nil || ep.URL == "" {
				fmt.Fprintln(os.Stderr, "kici-orchestrator healthcheck: KICI_PORT=0 and no URL in", filepath.Join(cfg.DataDir, config.EndpointFile))
				return 1
			}
			*base = ep.URL
		}
		if cfg.TLS() {
			// The probe speaks TLS to a TLS listener and trusts what the
			// node's own agents trust.
			if rest, ok := strings.CutPrefix(*base, "http://"); ok {
				*base = "https://" + rest
			}
			ca := cfg.TLSCAFile
			if ca == "" {
				ca = cfg.TLSCertFile
			}
			if err := tlsconf.InstallClientCA(ca); err != nil {
				fmt.Fprintln(os.Stderr, "kici-orchestrator healthcheck:", err)
				return 2
			}
		}
	}
	path := "/health"
	if *ready {
		path = "/ready"
	}
	if err := healthcheck.Probe(context.Background(), strings.TrimSuffix(*base, "/"), path); err != nil {
		fmt.Fprintln(os.Stderr, "kici-orchestrator:", err)
		return 1
	}
	return 0
}

const usage = `kici-orchestrator — the kici CI/CD server

Usage:
  kici-orchestrator            start the server (configured by KICI_* environment variables)
  kici-orchestrator version    print the version
  kici-orchestrator healthcheck [--ready] [--url URL]
                               GET the local server's /health (--ready: /ready,
                               which also checks the database); exit 0 on HTTP
                               200, else 1. For container HEALTHCHECKs.
  kici-orchestrator migrate status|up|down-to VERSION
                               report, apply or roll back the database schema
                               (docs/upgrade.md)
  kici-orchestrator admin …    the kici-admin command tree with direct-database
                               mode (--database-url / KICI_DATABASE_URL) built
                               in; kici-admin hands such commands to it.

With no configuration it runs the embedded default:
  - data directory: KICI_DATA_DIR, else /var/lib/kici if writable, else
    $XDG_STATE_HOME/kici (~/.local/state/kici), else $TMPDIR/kici-data
  - SQLite database and step logs in the data directory
  - an owner admin token written to <data>/admin-token (mode 0600), so
    kici-admin on this host works without flags
  - kici-agent processes spawned on this host for queued jobs (KICI_MAX_AGENTS)

Common settings:
  KICI_HOST           address to bind (default 127.0.0.1)
  KICI_PORT           port (default 4000; 0 picks a free one)
  KICI_DATABASE_URL   PostgreSQL URL; empty = embedded SQLite
  KICI_MODE           independent (default) | observed | hybrid | platform

Any unknown KICI_* variable stops startup with a message naming it.
See docs/configuration.md for every variable.
`
