// Package cli implements the kici-admin command tree: operator commands that
// talk to a kici orchestrator's admin HTTP API (sources, runs, logs).
//
// Connection: -u/--url (KICI_ADMIN_URL) and -t/--token (KICI_ADMIN_TOKEN);
// when no URL is given, the local data directory (--data-dir, KICI_DATA_DIR
// or config.DefaultDataDir()) is read for orchestrator.json and admin-token,
// so kici-admin on the orchestrator's host needs no flags.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/tlsconf"
)

// Version is reported by `kici-admin --version`; set by the main package.
var Version = "dev"

// IO is the environment a command tree runs in. Zero fields take the process
// defaults (os.Stdout, os.Stderr, os.Getenv, a 30 s HTTP client).
type IO struct {
	// Stdout receives command output.
	Stdout io.Writer
	// Stderr receives errors and progress notes.
	Stderr io.Writer
	// Getenv reads environment variables (KICI_ADMIN_URL, KICI_ADMIN_TOKEN,
	// KICI_DATA_DIR).
	Getenv func(string) string
	// HTTPClient performs API calls.
	HTTPClient *http.Client
	// OpenDatabase serves direct-database mode (--database-url): it opens
	// the database named by the URL and returns a transport answering admin
	// API requests in-process, the bearer token it accepts and the function
	// closing the database (package cli/direct's Open). nil ⇒ the flag is
	// refused, and the binary links no server package for it.
	OpenDatabase func(ctx context.Context, databaseURL string) (http.RoundTripper, string, func() error, error)
	// DelegateDirect, used when OpenDatabase is nil, hands the whole command
	// line to a binary that has direct-database mode (kici-admin execs
	// `kici-orchestrator admin` with its own arguments and environment). It
	// returns only on failure, with an error saying what to install.
	DelegateDirect func() error
	// Migrate serves `kici-admin migrate` (kici-orchestrator's migrate
	// command: args as after "migrate", output to stdout and stderr) and
	// returns its exit code; nil ⇒ DelegateDirect hands the command line to
	// kici-orchestrator.
	Migrate func(args []string, stdout, stderr io.Writer) int
	// Backup serves `kici-admin backup` (the SQLite copy, printing what it
	// wrote to stdout); nil ⇒ DelegateDirect hands the command line to
	// kici-orchestrator.
	Backup func(ctx context.Context, req BackupRequest, stdout io.Writer) error
}

func (o IO) withDefaults() IO {
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	return o
}

// ExitError ends a command with Code without printing "Error:" (the command
// already printed its outcome), e.g. `runs wait` on a failed run.
type ExitError struct {
	// Code is the process exit code.
	Code int
}

// Error implements error.
func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// app holds the global flags and the lazily built API client.
type app struct {
	io      IO
	url     string
	token   string
	dataDir string
	json    bool
	quiet   bool
	client  *Client
}

// NewAdminCommand builds the kici-admin command tree.
func NewAdminCommand(o IO) *cobra.Command {
	a := &app{io: o.withDefaults()}
	root := &cobra.Command{
		Use:   "kici-admin",
		Short: "Administer a kici orchestrator over its admin API",
		Long: `kici-admin manages a kici orchestrator: event sources, runs, jobs and logs.

Connection: --url/--token (or KICI_ADMIN_URL/KICI_ADMIN_TOKEN). Without a URL,
kici-admin reads orchestrator.json and admin-token from the local data directory
(--data-dir, KICI_DATA_DIR, or the orchestrator's default), so on the
orchestrator's host no flags are needed.`,
		Example: `  kici-admin source add local --org demo --path ~/src/app
  kici-admin source trigger-local <source-id>
  kici-admin runs list --status running,failed
  kici-admin runs logs <run-id> --follow
  kici-admin --url http://ci.internal:4000 --token kadm_... runs list --json`,
		Version:       Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(a.io.Stdout)
	root.SetErr(a.io.Stderr)
	root.Flags().BoolP("version", "V", false, "print the kici-admin version")
	pf := root.PersistentFlags()
	// Env values are applied when the client is built, not as flag defaults,
	// so --help never prints a token.
	pf.StringVarP(&a.url, "url", "u", "", "orchestrator base URL (env KICI_ADMIN_URL; default: the local orchestrator)")
	pf.StringVarP(&a.token, "token", "t", "", "admin bearer token (env KICI_ADMIN_TOKEN; default: the local admin-token file)")
	pf.StringVar(&a.dataDir, "data-dir", "", "data directory of a local orchestrator (default: KICI_DATA_DIR or the orchestrator's default)")
	pf.BoolVar(&a.json, "json", false, "print raw JSON instead of tables")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "print only ids, one per line (for scripts): source add prints the source id, trigger-local the delivery id, runs list the run ids")

	root.AddCommand(a.sourceCommand(), a.runsCommand())
	root.AddCommand(a.orchestratorCommand(), a.clusterCommand(), a.diagnoseCommand())
	root.AddCommand(a.eventLogCommand(), a.eventCommand(), a.registrationCommand())
	root.AddCommand(a.attestationsCommand(), a.signingKeyCommand())
	root.AddCommand(a.clusterSettingsCommand(), a.scalerCommand())
	root.AddCommand(a.tokenCommand(), a.sessionCommand(), a.signInCommand(), a.agentCommand(), a.secretCommand(), a.accessLogCommand())
	root.AddCommand(a.contextCommand(), a.variableCommand())
	root.AddCommand(a.heldRunCommand(), a.trustPolicyCommand())
	root.AddCommand(a.checkRunCommand(), a.notificationCommand(), a.migrateCommand(), a.backupCommand())
	return root
}

// Run executes kici-admin with args and returns the process exit code:
// 0 on success, 1 on any error (printed as "Error: …" on stderr), or an
// ExitError's code.
func Run(ctx context.Context, args []string, o IO) int {
	o = o.withDefaults()
	cmd := NewAdminCommand(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	fmt.Fprintf(o.Stderr, "Error: %v\n", err)
	return 1
}

// api returns the client, resolving URL and token on first use.
func (a *app) api() (*Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	dataDir := a.dataDir
	if dataDir == "" {
		if v := strings.TrimSpace(a.io.Getenv("KICI_DATA_DIR")); v != "" {
			dataDir = v
		} else {
			dataDir = config.DefaultDataDir()
		}
	}
	url, token := strings.TrimRight(a.url, "/"), a.token
	if url == "" {
		url = strings.TrimRight(strings.TrimSpace(a.io.Getenv("KICI_ADMIN_URL")), "/")
	}
	if token == "" {
		token = strings.TrimSpace(a.io.Getenv("KICI_ADMIN_TOKEN"))
	}
	if url == "" {
		lu, lt, err := config.ReadLocalEndpoint(dataDir)
		if err != nil {
			return nil, err
		}
		url = lu
		if token == "" {
			token = lt
		}
	} else if token == "" {
		// The local token is only sent to the local orchestrator's URL.
		if lu, lt, err := config.ReadLocalEndpoint(dataDir); err == nil && strings.TrimRight(lu, "/") == url {
			token = lt
		} else {
			return nil, fmt.Errorf("no admin token: pass --token or set KICI_ADMIN_TOKEN")
		}
	}
	hc, err := withCAFile(a.io.HTTPClient, strings.TrimSpace(a.io.Getenv(tlsconf.CAFileVar)))
	if err != nil {
		return nil, err
	}
	a.client = &Client{BaseURL: url, Token: token, HTTP: hc}
	return a.client, nil
}

// out is the command output writer.
func (a *app) out() io.Writer { return a.io.Stdout }

// withCAFile returns hc trusting caFile's PEM certificates besides the
// system roots (KICI_TLS_CA_FILE: an orchestrator with a private CA or a
// self-signed certificate); hc itself when caFile is "". A client with a
// transport of its own keeps it.
func withCAFile(hc *http.Client, caFile string) (*http.Client, error) {
	if caFile == "" || hc.Transport != nil {
		return hc, nil
	}
	cfg, err := tlsconf.ClientConfig(caFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	c := *hc
	c.Transport = tr
	return &c, nil
}
