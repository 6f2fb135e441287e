package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/termsafe"
)

// ---------------------------------------------------------------- token

// tokenCommand is `kici-admin token create|list|revoke`.
func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage admin API tokens (roles owner, admin, auditor; optional expiry and routing-key scope)",
		Example: `  kici-admin token create --label ci-reader --role auditor --expires-in 720h
  kici-admin token create --label team-a --role admin --routing-key generic:acme:4f1c...
  kici-admin token list
  kici-admin token revoke <token-id>`,
	}
	var label, role, routingKey, expiresIn string
	create := &cobra.Command{
		Example: "  kici-admin token create --label ci-reader --role auditor --expires-in 720h",
		Use:     "create",
		Short:   "Create a token; its plaintext is printed once and never stored",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := map[string]any{"label": label, "role": role}
			if routingKey != "" {
				body["routingKey"] = routingKey
			}
			if expiresIn != "" {
				d, err := time.ParseDuration(expiresIn)
				if err != nil || d <= 0 {
					return fmt.Errorf("--expires-in %q: want a positive duration such as 24h or 90m", expiresIn)
				}
				body["expiresAt"] = time.Now().Add(d).UTC().Format(time.RFC3339)
			}
			var resp struct{ Token, ID string }
			if done, err := a.callJSON(cmd, http.MethodPost, apitypes.AdminPrefix+"/tokens", nil, body, &resp); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "id:    %s\ntoken: %s\n", resp.ID, resp.Token)
			fmt.Fprintln(a.io.Stderr, "Store the token now: it is not shown again.")
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&label, "label", "", "what the token is for (1-255 characters)")
	f.StringVar(&role, "role", "", "owner, admin or auditor")
	f.StringVar(&routingKey, "routing-key", "", "scope the token to one routing key (default: unscoped)")
	f.StringVar(&expiresIn, "expires-in", "", "expire after this duration, e.g. 720h (default: never)")
	_ = create.MarkFlagRequired("label")
	_ = create.MarkFlagRequired("role")

	list := &cobra.Command{
		Example: "  kici-admin token list --json",
		Use:     "list", Short: "List admin tokens, newest first (never their plaintext)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp struct{ Tokens []apitypes.AdminTokenView }
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/tokens", nil, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "ID", "LABEL", "ROLE", "ROUTING KEY", "CREATED", "EXPIRES", "REVOKED")
			for _, v := range resp.Tokens {
				rk := "-"
				if v.RoutingKey != nil {
					rk = *v.RoutingKey
				}
				exp := "never"
				if v.ExpiresAt != nil {
					exp = fmtTime(v.ExpiresAt)
				}
				t.row(v.ID, termsafe.Line(v.Label), v.Role, termsafe.Line(rk), fmtTime(&v.CreatedAt), exp, strconv.FormatBool(v.Revoked))
			}
			t.flush()
			return nil
		},
	}
	revoke := &cobra.Command{
		Example: "  kici-admin token revoke 6f1d0c7e-…",
		Use:     "revoke <token-id>", Short: "Revoke an admin token: it gets 401 from now on", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.deleteAndConfirm(cmd, apitypes.AdminPrefix+"/tokens/"+url.PathEscape(args[0]), nil, fmt.Sprintf("token %s revoked", args[0]))
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// ---------------------------------------------------------------- agent

// agentCommand is `kici-admin agent register|list|revoke` (static agent
// tokens).
func (a *app) agentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Manage static agent tokens: register (mint), list, revoke (closes live connections)",
		Example: `  kici-admin agent register --labels linux,gpu
  kici-admin agent list
  kici-admin agent revoke <token-id>`,
	}
	var labels, mandatory []string
	var expiresIn string
	register := &cobra.Command{
		Example: "  kici-admin agent register --labels linux,gpu\n  kici-admin agent register --mandatory-label secure --labels linux,secure",
		Use:     "register",
		Short:   "Mint a static agent token (KICI_AGENT_TOKEN); --labels limits the labels an agent using it may claim",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := map[string]any{}
			if cmd.Flags().Changed("labels") {
				body["labels"] = labels
			}
			if len(mandatory) > 0 {
				body["mandatoryLabels"] = mandatory
			}
			if expiresIn != "" {
				d, err := time.ParseDuration(expiresIn)
				if err != nil || d <= 0 {
					return fmt.Errorf("--expires-in %q: want a positive duration such as 24h", expiresIn)
				}
				body["expiresAt"] = time.Now().Add(d).UTC().Format(time.RFC3339)
			}
			var resp struct {
				ID, Token, TokenPrefix string
				Labels                 []string
				MandatoryLabels        []string
			}
			if done, err := a.callJSON(cmd, http.MethodPost, apitypes.AgentTokenPath, nil, body, &resp); done || err != nil {
				return err
			}
			scope := "any"
			if resp.Labels != nil {
				scope = strings.Join(resp.Labels, ",")
			}
			fmt.Fprintf(a.out(), "id:     %s\ntoken:  %s\nlabels: %s\n", resp.ID, resp.Token, scope)
			if len(resp.MandatoryLabels) > 0 {
				fmt.Fprintf(a.out(), "mandatory labels: %s\n", strings.Join(resp.MandatoryLabels, ","))
			}
			fmt.Fprintln(a.io.Stderr, "Give the token to the agent as KICI_AGENT_TOKEN: it is not shown again.")
			return nil
		},
	}
	register.Flags().StringSliceVar(&labels, "labels", nil, "labels an agent using this token may claim (comma-separated; default: any)")
	register.Flags().StringSliceVar(&mandatory, "mandatory-label", nil, "taint: agents using this token carry this label and only run jobs whose runsOn names it (repeatable)")
	register.Flags().StringVar(&expiresIn, "expires-in", "", "expire after this duration; live connections close then (default: never)")

	var typ string
	list := &cobra.Command{
		Example: "  kici-admin agent list --type static",
		Use:     "list", Short: "List live agent tokens (static and ephemeral)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if typ != "" {
				q.Set("type", typ)
			}
			var resp struct{ Tokens []apitypes.AgentTokenView }
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AgentTokenPath, q, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "ID", "PREFIX", "TYPE", "LABELS", "MANDATORY", "CREATED", "EXPIRES")
			for _, v := range resp.Tokens {
				ls := "any"
				if v.Labels != nil {
					ls = strings.Join(v.Labels, ",")
				}
				exp := "never"
				if v.ExpiresAt != nil {
					exp = fmtTime(v.ExpiresAt)
				}
				t.row(v.ID, v.TokenPrefix, string(v.AgentType), ls, orDash(strings.Join(v.MandatoryLabels, ",")), fmtTime(&v.CreatedAt), exp)
			}
			t.flush()
			return nil
		},
	}
	list.Flags().StringVar(&typ, "type", "", "static or ephemeral (default: both)")
	revoke := &cobra.Command{
		Example: "  kici-admin agent revoke 0b9e…",
		Use:     "revoke <token-id>", Short: "Revoke an agent token and close its live connections (the agents stop reconnecting)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct{ Kicked int }
			if done, err := a.callJSON(cmd, http.MethodDelete, apitypes.AgentTokenPath+"/"+url.PathEscape(args[0]), nil, nil, &resp); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "agent token %s revoked, %d connection(s) closed\n", args[0], resp.Kicked)
			return nil
		},
	}
	cmd.AddCommand(register, list, revoke)
	return cmd
}

// ---------------------------------------------------------------- secret

// secretCommand is `kici-admin secret scopes|list|set|delete|rotate-key`.
func (a *app) secretCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage secrets (encrypted under the master key; values are never shown)",
		Example: `  printf %s "$NPM_TOKEN" | kici-admin secret set --org acme release npm_token --from-stdin
  kici-admin secret set --org acme release signing_key --from-file key.pem
  kici-admin secret set --org acme release npm_token --prompt
  kici-admin secret scopes --org acme
  kici-admin secret list --org acme release
  kici-admin secret delete --org acme release npm_token
  kici-admin secret delete --org acme release          # the whole scope
  kici-admin secret rotate-key`,
	}
	var org string
	orgFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&org, "org", "", "organisation id")
		_ = c.MarkFlagRequired("org")
	}
	scopes := &cobra.Command{
		Example: "  kici-admin secret scopes --org acme",
		Use:     "scopes", Short: "List the org's secret scopes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp struct{ Scopes []string }
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/secrets/scopes", url.Values{"orgId": {org}}, nil, &resp); done || err != nil {
				return err
			}
			for _, s := range resp.Scopes {
				fmt.Fprintln(a.out(), termsafe.Line(s))
			}
			return nil
		},
	}
	orgFlag(scopes)
	list := &cobra.Command{
		Example: "  kici-admin secret list --org acme release",
		Use:     "list <scope>", Short: "List the key names of a scope (never values)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct{ Keys []string }
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/secrets/keys", url.Values{"orgId": {org}, "scope": {args[0]}}, nil, &resp); done || err != nil {
				return err
			}
			for _, k := range resp.Keys {
				fmt.Fprintln(a.out(), termsafe.Line(k))
			}
			return nil
		},
	}
	orgFlag(list)

	var fromStdin, prompt bool
	var fromFile, value string
	set := &cobra.Command{
		Example: "  printf %s \"$NPM_TOKEN\" | kici-admin secret set --org acme release npm_token --from-stdin\n  kici-admin secret set --org acme release npm_token --prompt",
		Use:     "set <scope> <key>",
		Short:   "Set a secret from stdin, a file or a no-echo prompt (--value puts it on the command line: avoid)",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, b := range []bool{fromStdin, prompt, fromFile != "", cmd.Flags().Changed("value")} {
				if b {
					n++
				}
			}
			if n != 1 {
				return errors.New("give exactly one of --from-stdin, --from-file, --prompt or --value")
			}
			var v string
			switch {
			case fromStdin:
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
				if err != nil {
					return fmt.Errorf("reading stdin: %w", err)
				}
				v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			case fromFile != "":
				b, err := os.ReadFile(fromFile)
				if err != nil {
					return err
				}
				v = string(b)
			case prompt:
				var err error
				if v, err = a.promptSecret(cmd); err != nil {
					return err
				}
			default:
				fmt.Fprintln(a.io.Stderr, "Warning: --value leaves the secret in your shell history and the process list; prefer --from-stdin, --from-file or --prompt.")
				v = value
			}
			if v == "" {
				return errors.New("the secret value is empty")
			}
			path := apitypes.AdminPrefix + "/secrets/" + url.PathEscape(org) + "/" + url.PathEscape(args[0]) + "/" + url.PathEscape(args[1])
			if done, err := a.callJSON(cmd, http.MethodPut, path, nil, map[string]string{"value": v}, nil); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "secret %s:%s set\n", termsafe.Line(args[0]), termsafe.Line(args[1]))
			return nil
		},
	}
	orgFlag(set)
	set.Flags().BoolVar(&fromStdin, "from-stdin", false, "read the value from stdin (one trailing newline is dropped)")
	set.Flags().StringVar(&fromFile, "from-file", "", "read the value from a file, byte for byte")
	set.Flags().BoolVar(&prompt, "prompt", false, "ask for the value on the terminal without echo")
	set.Flags().StringVar(&value, "value", "", "the value itself (visible in shell history and ps: avoid)")

	del := &cobra.Command{
		Example: "  kici-admin secret delete --org acme release npm_token",
		Use:     "delete <scope> [key]", Short: "Delete one secret, or a whole scope with its secrets", Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := apitypes.AdminPrefix + "/secrets/scopes/" + url.PathEscape(org) + "/" + url.PathEscape(args[0])
			what := "scope " + args[0]
			if len(args) == 2 {
				path = apitypes.AdminPrefix + "/secrets/" + url.PathEscape(org) + "/" + url.PathEscape(args[0]) + "/" + url.PathEscape(args[1])
				what = "secret " + args[0] + ":" + args[1]
			}
			return a.deleteAndConfirm(cmd, path, nil, fmt.Sprintf("%s deleted", termsafe.Line(what)))
		},
	}
	orgFlag(del)
	rotate := &cobra.Command{
		Example: "  KICI_SECRET_KEY=<new> KICI_SECRET_KEY_OLD=<old> kici-orchestrator &\n  kici-admin secret rotate-key",
		Use:     "rotate-key",
		Short:   "Re-encrypt every secret and signing key with KICI_SECRET_KEY (run while KICI_SECRET_KEY_OLD is set)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp map[string]int
			if done, err := a.callJSON(cmd, http.MethodPost, apitypes.AdminPrefix+"/rotate-key", nil, nil, &resp); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "re-encrypted %d secret(s) and %d signing key(s)\n", resp["reEncrypted"], resp["reEncryptedSigningKeys"])
			return nil
		},
	}
	cmd.AddCommand(scopes, list, set, del, rotate)
	return cmd
}

// promptSecret reads a value from the terminal without echo (twice, to
// catch typos).
func (a *app) promptSecret(cmd *cobra.Command) (string, error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("--prompt needs a terminal on stdin; use --from-stdin to pipe the value")
	}
	fmt.Fprint(a.io.Stderr, "Secret value: ")
	v1, err := term.ReadPassword(fd)
	fmt.Fprintln(a.io.Stderr)
	if err != nil {
		return "", err
	}
	fmt.Fprint(a.io.Stderr, "Again: ")
	v2, err := term.ReadPassword(fd)
	fmt.Fprintln(a.io.Stderr)
	if err != nil {
		return "", err
	}
	if string(v1) != string(v2) {
		return "", errors.New("the two values differ")
	}
	return string(v1), nil
}

// ---------------------------------------------------------------- access log

// accessLogCommand is `kici-admin access-log list`.
func (a *app) accessLogCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "access-log",
		Short:   "Show the access log: every admin write and every secret read",
		Example: "  kici-admin access-log list --action secret.resolve --limit 20",
	}
	var action string
	var limit int
	list := &cobra.Command{
		Example: "  kici-admin access-log list --action secret.set",
		Use:     "list", Short: "List access-log entries, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if action != "" {
				q.Set("action", action)
			}
			var resp struct{ Entries []apitypes.AccessLogEntry }
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/access-log", q, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "AT", "ACTION", "RESOURCE", "BY", "DETAIL")
			for _, e := range resp.Entries {
				by := e.TokenLabel
				if by == "" {
					by = "system"
				}
				at := e.At
				t.row(fmtTime(&at), termsafe.Line(e.Action), termsafe.Line(e.Resource), termsafe.Line(by), termsafe.Line(e.Detail))
			}
			t.flush()
			return nil
		},
	}
	list.Flags().StringVar(&action, "action", "", "only this action (e.g. secret.set, token.create, secret.resolve)")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many entries (1-1000)")
	cmd.AddCommand(list)
	return cmd
}
