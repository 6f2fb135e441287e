// Command kici-agent is the kici worker: it connects to the orchestrator
// over a WebSocket, receives jobs, checks out the commit, runs the steps,
// streams logs and reports statuses. Configuration comes from KICI_*
// environment variables (see --help).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/agent"
	"kici.dev/kici/internal/agent/conn"
	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/agent/supervisor"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/hardening"
	"kici.dev/kici/internal/startpages"
	"kici.dev/kici/internal/tlsconf"
)

func main() {
	// Re-executed as a step's supervisor (the agent's Options.Supervisor).
	runner.Supervise(os.Args[1:])
	os.Exit(run(os.Args[1:]))
}

func envHelp() string {
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, v := range agent.EnvVars() {
		def := ""
		if v.Default != "" {
			def = " (default " + v.Default + ")"
		}
		fmt.Fprintf(&b, "  %-38s %s%s\n", v.Name, v.Help, def)
	}
	return b.String()
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "kici-agent",
		Short: "Run a kici agent: take jobs from the orchestrator and execute them",
		Long: "kici-agent connects to KICI_ORCHESTRATOR_URL, registers with its labels and runs\n" +
			"one job at a time. SIGTERM/SIGINT stop taking work, cancel the running job\n" +
			"gracefully (SIGTERM, grace period, SIGKILL), report it and exit; a second\n" +
			"signal kills the job at once. SIGUSR1 drains: finish the running job, take\n" +
			"no new one, exit.\n\n" + envHelp(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Steps run as this user: keep them out of /proc/<agent>/environ
			// and /proc/<agent>/mem (see docs/trust-model.md).
			noDumpErr := hardening.NoDump()
			cfg, err := agent.LoadConfig(os.Environ())
			if err != nil {
				return err
			}
			// wss:// to an orchestrator with a private CA or a self-signed
			// certificate: the dialer and the cache/artifact client use
			// http.DefaultTransport.
			if err := tlsconf.InstallClientCA(strings.TrimSpace(os.Getenv(tlsconf.CAFileVar))); err != nil {
				return err
			}
			// Children never inherit the token variables (the initial
			// environment block itself cannot be changed).
			os.Unsetenv("KICI_AGENT_TOKEN")
			os.Unsetenv("KICI_AGENT_TOKEN_FD")
			os.Unsetenv("KICI_AGENT_TOKEN_FILE")
			handler, err := config.LogHandler(os.Environ(), os.Stderr, logLevel(os.Getenv("KICI_LOG_LEVEL")))
			if err != nil {
				return err
			}
			logger := slog.New(handler)
			if noDumpErr != nil {
				logger.Warn("could not mark the agent process non-dumpable; steps of this user may read its memory", "err", noDumpErr)
			}
			conf, err := agent.ResolveConfinement(os.Environ(), os.Geteuid())
			if err != nil {
				return err
			}
			conf.ProbeNoteDir = cfg.WorkDir
			opts := agent.Options{Confinement: conf}
			if self, err := os.Executable(); err == nil {
				opts.Supervisor, opts.AgentBinary = supervisorPrefix(self), self
			} else {
				logger.Warn("no step supervisor (cannot find this executable); a killed agent may leave step processes behind", "err", err)
			}
			if opts.Supervisor, err = conf.TryNamespaces(opts.Supervisor, os.Environ()); err != nil {
				return err
			}
			if conf.Loud {
				logger.Warn("STEPS ARE NOT CONFINED: " + conf.Summary)
			} else {
				logger.Info(conf.Summary)
			}
			if !cfg.ScalerManaged {
				// A static agent idles between jobs for hours; a spawned
				// one runs its job at once, which would fault the pages
				// straight back.
				opts.Registered = func() { startpages.ReleaseLogged(logger, "agent") }
			}
			a := agent.New(cfg, logger, opts)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
			defer signal.Stop(sigs)
			usr1 := make(chan os.Signal, 1)
			signal.Notify(usr1, syscall.SIGUSR1)
			defer signal.Stop(usr1)
			go func() {
				for range usr1 {
					logger.Info("SIGUSR1 received; draining")
					a.Drain()
				}
			}()
			go func() {
				n := 0
				for s := range sigs {
					n++
					if n == 1 {
						logger.Info("signal received; shutting down", "signal", s.String())
						cancel()
						continue
					}
					logger.Warn("second signal; killing the running job", "signal", s.String())
					a.ForceStop()
				}
			}()
			err = a.Run(ctx)
			if errors.Is(err, conn.ErrAuthFailed) {
				return fmt.Errorf("authentication failed, not reconnecting: %w", err)
			}
			return err
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newAttestCmd())
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the agent version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "kici-agent %s\n", agent.Version)
		},
	})
	return root
}

func run(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		// In the log format KICI_LOG_FORMAT selects: a spawned agent's
		// fatal error lands in its log file as a JSON record with json.
		config.Fatal(os.Environ(), os.Stderr, "kici-agent", err)
		return 1
	}
	return 0
}

func logLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// supervisorPrefix is the command that runs each step under the step
// supervisor: kici-step-supervisor beside the agent's own binary (self)
// when it is there, else the agent binary re-executed as the supervisor
// (the same, at several times the start-up cost per step).
func supervisorPrefix(self string) []string {
	p := filepath.Join(filepath.Dir(self), supervisor.BinaryName)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return []string{p}
	}
	return []string{self, runner.SupervisorArg}
}
