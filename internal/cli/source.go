package cli

import (
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

func (a *app) sourceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "source",
		Short: "Manage event sources (local git repositories, GitHub, Gitea, GitLab, generic webhooks)",
		Example: `  kici-admin source add local --org demo --path ~/src/app
  kici-admin source list
  kici-admin source trigger-local <source-id> --ref main
  kici-admin source disable <source-id>
  kici-admin source delete <source-id>`,
	}
	add := &cobra.Command{
		Use:   "add",
		Short: "Register a source",
		Example: `  kici-admin source add local --org demo --path . --name app
  kici-admin source add github --org acme --name gh --forge-token-from-env GITHUB_TOKEN
  kici-admin source add gitea --org acme --name gitea --url https://gitea.example.com --forge-token-from-env GITEA_TOKEN
  kici-admin source add gitlab --org acme --name gitlab --url https://gitlab.example.com --forge-token-from-env GITLAB_TOKEN
  kici-admin source add generic --org demo --name hooks`,
	}
	add.AddCommand(a.sourceAddLocalCommand(), a.sourceAddGenericCommand(), a.sourceAddGitHubCommand(),
		a.sourceAddForgeCommand("gitea"), a.sourceAddForgeCommand("gitlab"))
	cmd.AddCommand(add, a.sourceListCommand(), a.sourceGetCommand(), a.sourceSecretCommand(), a.triggerLocalCommand())
	cmd.AddCommand(a.sourceSecretsCommand())
	cmd.AddCommand(a.sourceDeleteCommand(), a.sourceToggleCommand(true), a.sourceToggleCommand(false),
		a.sourceOrgWideCommand())
	return cmd
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9._-]+`)

// defaultSourceName derives a source name from a directory name.
func defaultSourceName(path string) string {
	n := invalidNameChars.ReplaceAllString(strings.ToLower(filepath.Base(path)), "-")
	return strings.Trim(n, "-")
}

func (a *app) sourceAddLocalCommand() *cobra.Command {
	var org, path, name string
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Register a git repository on the orchestrator's host as a local source",
		Long: `Register a git repository on the orchestrator's host. The path is made absolute
(and resolved to the repository's top level when git is available here); the
orchestrator checks that it is a git repository. The name defaults to the
directory name. Pushes are simulated with 'kici-admin source trigger-local'.`,
		Example: `  kici-admin source add local --org demo --path ~/src/app
  kici-admin source add local --org demo --path . --name app --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			if out, err := exec.CommandContext(cmd.Context(), "git", "-C", abs, "rev-parse", "--show-toplevel").Output(); err == nil {
				if top := strings.TrimSpace(string(out)); top != "" {
					abs = top
				}
			}
			if name == "" {
				name = defaultSourceName(abs)
			}
			return a.createSource(cmd, apitypes.CreateSourceRequest{
				OrgID: org, Name: name, ProviderType: apitypes.ProviderLocal,
				LocalConfig: &apitypes.LocalConfig{Path: abs},
			})
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organisation id (required)")
	cmd.Flags().StringVar(&path, "path", ".", "path of the git repository")
	cmd.Flags().StringVar(&name, "name", "", "source name, unique in the org (default: the directory name)")
	_ = cmd.MarkFlagRequired("org")
	return cmd
}

func (a *app) sourceAddGenericCommand() *cobra.Command {
	var org, name, method, header, allow, idemHeader, idemPath string
	var maxBytes int64
	var rpm int
	cmd := &cobra.Command{
		Use:   "generic",
		Short: "Register a generic webhook source",
		Long: `Register a generic webhook source. Deliveries are verified with an
HMAC-SHA256 signature by default (the secret is generated; read it with
'kici-admin source get-webhook-secret'), or a bearer token, a client IP
allowlist, or nothing. With an idempotency key (a header, or a JSONPath into
the body) a sender's retries of the same event are recorded once.`,
		Example: `  kici-admin source add generic --org demo --name hooks
  kici-admin source add generic --org demo --name alerts --verification-method bearer_token
  kici-admin source add generic --org demo --name deploys --idempotency-key-path '$.deployment.id' --rate-limit-rpm 60
  kici-admin source add generic --org demo --name lan --verification-method ip_allowlist --ip-allowlist 10.0.0.5,10.0.0.6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := apitypes.CreateSourceRequest{OrgID: org, Name: name, ProviderType: apitypes.ProviderGeneric,
				VerificationMethod: method, MaxPayloadBytes: maxBytes, RateLimitRPM: rpm,
				IdempotencyKeyHeader: idemHeader, IdempotencyKeyPath: idemPath}
			if header != "" || allow != "" {
				req.VerificationConfig = &apitypes.VerificationConfig{Header: header}
				for _, ip := range strings.Split(allow, ",") {
					if ip = strings.TrimSpace(ip); ip != "" {
						req.VerificationConfig.IPAllowlist = append(req.VerificationConfig.IPAllowlist, ip)
					}
				}
			}
			return a.createSource(cmd, req)
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "organisation id (required)")
	f.StringVar(&name, "name", "", "source name, unique in the org (required)")
	f.StringVar(&method, "verification-method", "", "hmac_sha256 (default), bearer_token, ip_allowlist or none")
	f.StringVar(&header, "header", "", "header carrying the signature or token (default X-Kici-Signature-256 / Authorization)")
	f.StringVar(&allow, "ip-allowlist", "", "comma-separated client IPs, with --verification-method ip_allowlist")
	f.Int64Var(&maxBytes, "max-payload-bytes", 0, "largest accepted body in bytes (default 1048576, at most 10485760)")
	f.IntVar(&rpm, "rate-limit-rpm", 0, "accepted deliveries per minute (default 600; -1 = unlimited)")
	f.StringVar(&idemHeader, "idempotency-key-header", "", "header whose value identifies a delivery (retries with the same value are duplicates)")
	f.StringVar(&idemPath, "idempotency-key-path", "", "JSONPath to the delivery's identity in the body, e.g. '$.event.id'")
	_ = cmd.MarkFlagRequired("org")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func (a *app) createSource(cmd *cobra.Command, req apitypes.CreateSourceRequest) error {
	return a.createSourceAs(cmd, req, string(req.ProviderType))
}

// createSourceAs posts req to /generic-sources and prints the new source,
// calling it a kind source (gitea, gitlab: what the operator asked for,
// although it is stored as a generic source with a gitConfig).
func (a *app) createSourceAs(cmd *cobra.Command, req apitypes.CreateSourceRequest, kind string) error {
	c, err := a.api()
	if err != nil {
		return err
	}
	var resp struct {
		Source apitypes.SourceView `json:"source"`
	}
	raw, err := c.Post(cmd.Context(), apitypes.AdminPrefix+"/generic-sources", req, &resp)
	if err != nil {
		return err
	}
	if a.json {
		printJSON(a.out(), raw)
		return nil
	}
	s := resp.Source
	w := a.out()
	if a.quiet {
		fmt.Fprintln(w, s.ID)
		return nil
	}
	fmt.Fprintf(w, "Created %s source %q in org %q\n", kind, s.Name, s.OrgID)
	fmt.Fprintf(w, "  id:          %s\n", s.ID)
	fmt.Fprintf(w, "  routing key: %s\n", s.RoutingKey)
	if s.LocalConfig != nil {
		fmt.Fprintf(w, "  path:        %s\n", s.LocalConfig.Path)
	}
	fmt.Fprintf(w, "  webhook:     %s%s\n", c.BaseURL, s.WebhookPath)
	if s.ProviderType == apitypes.ProviderLocal {
		fmt.Fprintf(w, "Trigger a build of the current commit with: kici-admin source trigger-local %s\n", s.ID)
	} else {
		fmt.Fprintf(w, "Show the webhook secret with: kici-admin source get-webhook-secret %s\n", s.ID)
	}
	return nil
}

func (a *app) sourceListCommand() *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List sources",
		Example: `  kici-admin source list
  kici-admin source list --org demo --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			q := url.Values{}
			if org != "" {
				q.Set("orgId", org)
			}
			var resp struct {
				Sources []apitypes.SourceView `json:"sources"`
			}
			raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/generic-sources", q, &resp)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			if len(resp.Sources) == 0 {
				fmt.Fprintln(a.out(), "No sources. Add one with: kici-admin source add local --org <org> --path <repo>")
				return nil
			}
			t := newTable(a.out(), "ID", "ORG", "NAME", "TYPE", "ENABLED", "PATH", "CREATED")
			for _, s := range resp.Sources {
				path := "-"
				if s.LocalConfig != nil {
					path = s.LocalConfig.Path
				}
				t.row(s.ID, s.OrgID, s.Name, string(s.ProviderType), fmt.Sprint(s.Enabled), path, fmtTime(&s.CreatedAt))
			}
			t.flush()
			return nil
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "only sources of this organisation")
	return cmd
}

// getSource fetches one source.
func (a *app) getSource(cmd *cobra.Command, id string) (*apitypes.SourceView, []byte, error) {
	c, err := a.api()
	if err != nil {
		return nil, nil, err
	}
	var resp struct {
		Source apitypes.SourceView `json:"source"`
	}
	raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/generic-sources/"+url.PathEscape(id), nil, &resp)
	if err != nil {
		return nil, nil, err
	}
	return &resp.Source, raw, nil
}

func (a *app) sourceGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get <id>",
		Short:   "Show one source",
		Example: `  kici-admin source get 1b4e28ba-2fa1-11d2-883f-0016d3cca427`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, raw, err := a.getSource(cmd, args[0])
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			t := newTable(a.out(), "FIELD", "VALUE")
			t.row("id", s.ID)
			t.row("org", s.OrgID)
			t.row("name", s.Name)
			t.row("type", string(s.ProviderType))
			t.row("routing key", s.RoutingKey)
			t.row("verification", s.VerificationMethod)
			t.row("enabled", fmt.Sprint(s.Enabled))
			if s.LocalConfig != nil {
				t.row("path", s.LocalConfig.Path)
			}
			t.row("webhook path", s.WebhookPath)
			t.row("created", fmtTime(&s.CreatedAt))
			t.flush()
			return nil
		},
	}
}

// getSourceSecret fetches a source's webhook secret.
func (a *app) getSourceSecret(cmd *cobra.Command, id string) (string, []byte, error) {
	c, err := a.api()
	if err != nil {
		return "", nil, err
	}
	var resp struct {
		WebhookSecret string `json:"webhookSecret"`
	}
	raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/generic-sources/"+url.PathEscape(id)+"/webhook-secret", nil, &resp)
	if err != nil {
		return "", nil, err
	}
	return resp.WebhookSecret, raw, nil
}

func (a *app) sourceSecretCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get-webhook-secret <id>",
		Short:   "Print a source's webhook HMAC secret (owner/admin only)",
		Example: `  SECRET=$(kici-admin source get-webhook-secret <source-id>)`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			secret, raw, err := a.getSourceSecret(cmd, args[0])
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			fmt.Fprintln(a.out(), secret)
			return nil
		},
	}
}
