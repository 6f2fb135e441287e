package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"kici.dev/kici/internal/api/apitypes"
)

// forgeToken holds the forge credential flags of `source add
// github|gitea|gitlab`: --forge-token (a value or @file) and
// --forge-token-from-env NAME. They are not called --token because
// kici-admin's global --token is the admin token.
type forgeToken struct {
	value, fromEnv string
}

// add registers the flags; forge names the forge in the help.
func (t *forgeToken) add(f *pflag.FlagSet, forge string) {
	f.StringVar(&t.value, "forge-token", "", forge+" access token, or @file (kept in the source, used to read locks and post statuses)")
	f.StringVar(&t.fromEnv, "forge-token-from-env", "", "read the "+forge+" access token from this environment variable (keeps it out of the shell history)")
}

// given reports whether a forge token was passed by the new flags.
func (t *forgeToken) given() bool { return t.value != "" || t.fromEnv != "" }

// resolve returns the token, read from the environment (getenv) or a file,
// trimmed; "" when none was given.
func (t *forgeToken) resolve(getenv func(string) string) (string, error) {
	if t.value != "" && t.fromEnv != "" {
		return "", fmt.Errorf("give --forge-token or --forge-token-from-env, not both")
	}
	v := t.value
	if t.fromEnv != "" {
		if v = getenv(t.fromEnv); v == "" {
			return "", fmt.Errorf("--forge-token-from-env: %s is empty", t.fromEnv)
		}
	}
	v, err := readValue(v)
	if err != nil {
		return "", fmt.Errorf("--forge-token: %w", err)
	}
	return strings.TrimSpace(v), nil
}

// tokenOccurrences is a string flag that keeps every value it was given:
// `source add github` defines --token/-t itself (the GitHub token's old
// name), which hides the global admin --token from the parser, so it must
// see both uses to tell them apart (sortTokens).
type tokenOccurrences struct{ values []string }

func (o *tokenOccurrences) String() string     { return "" }
func (o *tokenOccurrences) Type() string       { return "string" }
func (o *tokenOccurrences) Set(v string) error { o.values = append(o.values, v); return nil }

// sortTokens gives the --token values of `source add github` their
// meaning and returns the GitHub token among them ("" when none). A value
// with the admin-token prefix (kadm_) is the admin token; so is a lone
// value when the GitHub credentials come by --forge-token(-from-env) or an
// App (which takes no token). Otherwise a lone value is the GitHub token
// (the command's old form; the admin token then comes from
// KICI_ADMIN_TOKEN or the local data directory), and one admin token plus
// one other value are those two. Anything else cannot be told apart and
// is refused with the form that works.
func (a *app) sortTokens(cmd *cobra.Command, occ *tokenOccurrences, forgeGiven bool) (legacyForge string, err error) {
	var admin, other []string
	for _, v := range occ.values {
		if strings.HasPrefix(v, apitypes.AdminTokenPrefix) {
			admin = append(admin, v)
		} else {
			other = append(other, v)
		}
	}
	switch {
	case len(occ.values) == 0:
		return "", nil
	case len(occ.values) == 1 && (len(admin) == 1 || forgeGiven):
		a.token = occ.values[0]
		return "", nil
	case len(admin) <= 1 && len(other) == 1 && !forgeGiven:
		if len(admin) == 1 {
			a.token = admin[0]
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "Note: a --token that is not an admin token (kadm_…) is read here as the GitHub token, its old name; write --forge-token for it.")
		return other[0], nil
	default:
		return "", fmt.Errorf("--token was given %d times: kici-admin cannot tell the admin token from the GitHub token; pass the GitHub token as --forge-token (or --forge-token-from-env NAME) and the admin token as --token", len(occ.values))
	}
}

// sourceAddForgeCommand is `source add gitea|gitlab`: a universal-git
// source (a generic source with a gitConfig, docs/ingress.md) set up for
// that forge's webhooks, lock reads and commit statuses.
func (a *app) sourceAddForgeCommand(kind string) *cobra.Command {
	forge, presets := "Gitea", []string{"gitea", "forgejo", "gogs"}
	if kind == "gitlab" {
		forge, presets = "GitLab", []string{"gitlab-repo"}
	}
	var org, name, root, urlTemplate, preset, username string
	var rpm int
	var tok forgeToken
	cmd := &cobra.Command{
		Use:   kind,
		Short: "Register a " + forge + " source (its webhooks, lock reads with git, commit statuses)",
		Long: `Register a ` + forge + ` source: a universal-git source that receives ` + forge + `'s own
webhooks, reads each event's lock with git from --url, and posts one commit
status per job there with the --forge-token (a personal or project access
token with read access to the repositories and permission to write commit
statuses). Without a token locks are read anonymously and no statuses are
posted. The webhook secret is generated; configure it on ` + forge + ` with the
printed webhook URL (content type application/json)` + map[string]string{
			"gitea":  ` as the webhook's Secret (Gitea signs with X-Gitea-Signature).`,
			"gitlab": ` as the webhook's Secret token (GitLab sends it in X-Gitlab-Token).`}[kind],
		Example: map[string]string{
			"gitea": `  kici-admin source add gitea --org acme --name gitea --url https://gitea.example.com --forge-token-from-env GITEA_TOKEN
  kici-admin source add gitea --org acme --name codeberg --url https://codeberg.org --preset forgejo --forge-token @token.txt`,
			"gitlab": `  kici-admin source add gitlab --org acme --name gitlab --url https://gitlab.example.com --forge-token-from-env GITLAB_TOKEN
  kici-admin --token kadm_... source add gitlab --org acme --name gl --url https://gitlab.example.com --forge-token @pat.txt`}[kind],
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(presets, preset) {
				return fmt.Errorf("--preset %q: must be one of %s", preset, strings.Join(presets, ", "))
			}
			root = strings.TrimRight(strings.TrimSpace(root), "/")
			if root == "" {
				return fmt.Errorf("--url is required: the %s web root, e.g. https://%s.example.com", forge, kind)
			}
			if urlTemplate == "" {
				urlTemplate = root + "/{repo}.git"
			}
			credential, err := tok.resolve(a.io.Getenv)
			if err != nil {
				return err
			}
			gc := &apitypes.GitConfig{Preset: preset, GitURLTemplate: urlTemplate, APIBaseURL: root, Username: username}
			if credential != "" {
				gc.CredentialType, gc.Credential = "pat", credential
			}
			req := apitypes.CreateSourceRequest{OrgID: org, Name: name, ProviderType: apitypes.ProviderGeneric, RateLimitRPM: rpm, GitConfig: gc,
				VerificationMethod: "hmac_sha256", VerificationConfig: &apitypes.VerificationConfig{Header: signatureHeaders[preset]}}
			if kind == "gitlab" {
				req.VerificationMethod = "bearer_token"
				req.VerificationConfig = &apitypes.VerificationConfig{Header: "X-Gitlab-Token"}
			}
			return a.createSourceAs(cmd, req, kind)
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "organisation id (required)")
	f.StringVar(&name, "name", "", "source name, unique in the org (required)")
	f.StringVar(&root, "url", "", forge+" web root, e.g. https://"+kind+".example.com (required; its API is <url>"+map[string]string{"gitea": "/api/v1", "gitlab": "/api/v4"}[kind]+")")
	f.StringVar(&urlTemplate, "git-url-template", "", "clone URL with {repo} (owner/name), {owner}, {name} (default <url>/{repo}.git)")
	f.StringVar(&preset, "preset", presets[0], "webhook dialect: "+strings.Join(presets, ", "))
	f.StringVar(&username, "username", "", "user name sent with the token (some servers want one)")
	f.IntVar(&rpm, "rate-limit-rpm", 0, "accepted deliveries per minute (default 600; -1 = unlimited)")
	tok.add(f, forge)
	_ = cmd.MarkFlagRequired("org")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("url")
	return cmd
}

// signatureHeaders are the HMAC headers of the Gitea-family presets.
var signatureHeaders = map[string]string{"gitea": "X-Gitea-Signature", "forgejo": "X-Forgejo-Signature", "gogs": "X-Gogs-Signature"}
