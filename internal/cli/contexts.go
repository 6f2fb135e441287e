package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

const contextsPath = apitypes.AdminPrefix + "/contexts"

func contextPath(name string, rest ...string) string {
	p := contextsPath + "/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

func orgQuery(org string) url.Values { return url.Values{"orgId": {org}} }

func requireFlags(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return fmt.Errorf("--%s is required", pairs[i])
		}
	}
	return nil
}

// contextCommand is `kici-admin context create|bind|set-policy|list|show|delete`
// over the admin API (KiCI `kici-admin context`).
func (a *app) contextCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Manage contexts: policy (reviewers, branches, timers), secret-scope bindings and variables",
		Example: `  kici-admin context create --org acme --name release --required-reviewers alice,bob --branch-restrictions '["main"]'
  kici-admin context bind --org acme --env release --scope 'release/*'
  kici-admin context set-policy --org acme --env release --required-reviewers ""
  kici-admin context set-policy --org acme --env release --trigger-types push,manual --repo-patterns 'acme/*'
  kici-admin context override set --org acme --name release --routing-key generic:acme:4f1c REGION us
  kici-admin context show --org acme --name release`,
	}
	var org, name, typ, glob, variables string
	var includeSecrets bool
	var pol contextPolicyFlags
	create := &cobra.Command{
		Example: "  kici-admin context create --org acme --name release --required-reviewers alice --wait-timer 60\n  kici-admin context create --org acme --name deploy --concurrency-limit 1 --concurrency-strategy cancel-pending --concurrency-timeout 30m\n  kici-admin context create --org acme --name staging --type template --variables '{\"REGION\":\"eu\"}'",
		Use:     "create",
		Short:   "Create or update (upsert) a context; --type template seeds --variables",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "name", name); err != nil {
				return err
			}
			body, err := pol.body(cmd)
			if err != nil {
				return err
			}
			body["orgId"] = org
			path := contextsPath
			if typ == "template" {
				if cmd.Flags().Changed("glob-pattern") {
					return errors.New("--glob-pattern is not allowed for a template")
				}
				path += "/templates"
				body["templateName"] = name
				if variables != "" {
					var vars map[string]string
					if err := json.Unmarshal([]byte(variables), &vars); err != nil {
						return errors.New(`--variables must be a JSON object of strings, e.g. '{"REGION":"eu"}'`)
					}
					body["variables"] = vars
				}
			} else {
				if variables != "" {
					return errors.New("--variables is only allowed with --type template")
				}
				if typ == "glob" && glob == "" {
					return errors.New("--glob-pattern is required for --type glob")
				}
				if typ != "glob" && glob != "" {
					return errors.New("--glob-pattern is only allowed with --type glob")
				}
				body["name"] = name
				if typ != "" {
					body["type"] = typ
				}
				if glob != "" {
					body["globPattern"] = glob
				}
			}
			var out struct {
				EnvID        string `json:"envId"`
				Created      bool   `json:"created"`
				VariablesSet *int   `json:"variablesSet"`
			}
			if done, err := a.callJSON(cmd, http.MethodPost, path, nil, body, &out); done || err != nil {
				return err
			}
			verb := "updated"
			if out.Created {
				verb = "created"
			}
			fmt.Fprintf(a.out(), "context %s %s (id %s)\n", name, verb, out.EnvID)
			if out.VariablesSet != nil {
				fmt.Fprintf(a.out(), "%d variable(s) set\n", *out.VariablesSet)
			}
			return nil
		},
	}
	create.Flags().StringVar(&typ, "type", "fixed", "fixed, glob or template")
	create.Flags().StringVar(&glob, "glob-pattern", "", "name pattern (required for --type glob, rejected otherwise)")
	create.Flags().StringVar(&variables, "variables", "", `template variables as a JSON object (--type template only)`)
	pol.register(create)

	var scope, host string
	bind := &cobra.Command{
		Example: "  kici-admin context bind --org acme --env release --scope 'release/*' --host '**'",
		Use:     "bind",
		Short:   "Bind a context to secret scopes matching --scope on hosts matching --host",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "env", name, "scope", scope); err != nil {
				return err
			}
			var out struct {
				Created bool `json:"created"`
			}
			body := map[string]string{"orgId": org, "scopePattern": scope, "hostPattern": host}
			if done, err := a.callJSON(cmd, http.MethodPost, contextPath(name, "bind"), nil, body, &out); done || err != nil {
				return err
			}
			if out.Created {
				fmt.Fprintf(a.out(), "bound %s to scope %s (host %s)\n", name, scope, host)
			} else {
				fmt.Fprintf(a.out(), "binding already present: %s → scope %s (host %s)\n", name, scope, host)
			}
			return nil
		},
	}
	bind.Flags().StringVar(&scope, "scope", "", `secret scope pattern: "/"-separated segments of letters, digits, . _ - and glob characters * ? { } , [ ], optional "pg:" prefix, placeholders ${agentId} ${host} ${label:NAME}`)
	bind.Flags().StringVar(&host, "host", "**", "host pattern: ** (any), an exact name or glob, or /regex/ (flag i allowed)")

	var setPol contextPolicyFlags
	setPolicy := &cobra.Command{
		Example: "  kici-admin context set-policy --org acme --env release --required-reviewers \"\" --hold-expiry 600\n  kici-admin context set-policy --org acme --env release --concurrency-limit 1 --concurrency-strategy cancel-pending --concurrency-timeout 45m",
		Use:     "set-policy",
		Short:   `Change policy fields; only the flags given change, "" clears`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "env", name); err != nil {
				return err
			}
			body, err := setPol.body(cmd)
			if err != nil {
				return err
			}
			if len(body) == 0 {
				return errors.New("give at least one policy flag")
			}
			body["orgId"] = org
			body["contextName"] = name
			if done, err := a.callJSON(cmd, http.MethodPatch, contextPath(name, "policy"), nil, body, nil); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "policy of %s updated\n", name)
			return nil
		},
	}
	setPol.register(setPolicy)

	list := &cobra.Command{
		Example: "  kici-admin context list --org acme --include-secrets",
		Use:     "list",
		Short:   "List the contexts of an org",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org); err != nil {
				return err
			}
			var out struct {
				Contexts []apitypes.ContextWithSecretKeys `json:"contexts"`
			}
			q := orgQuery(org)
			headers := []string{"NAME", "TYPE", "ENABLED", "REVIEWERS", "BRANCHES", "WAIT", "HOLD-EXPIRY", "TRUST"}
			if includeSecrets {
				q.Set("includeSecrets", "true")
				headers = append(headers, "SECRET KEYS")
			}
			if done, err := a.callJSON(cmd, http.MethodGet, contextsPath, q, nil, &out); done || err != nil {
				return err
			}
			t := newTable(a.out(), headers...)
			for _, row := range out.Contexts {
				c := &row.Context
				cols := []string{c.Name, contextType(c), strconv.FormatBool(c.Enabled), joinOr(c.RequiredReviewers, "-"), joinOr(c.BranchRestrictions, "*"),
					secs(c.WaitTimerSeconds, "-"), secs(c.HoldExpirySeconds, "3600s (default)"), orDash(deref(c.MinimumTrust))}
				if includeSecrets {
					cols = append(cols, joinOr(row.SecretKeys, "-"))
				}
				t.row(cols...)
			}
			t.flush()
			return nil
		},
	}

	list.Flags().BoolVar(&includeSecrets, "include-secrets", false, "also list the secret key names (never values) of each context's bound scopes")

	show := &cobra.Command{
		Example: "  kici-admin context show --org acme --name release",
		Use:     "show",
		Short:   "Show a context with its variables and bindings",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "name", name); err != nil {
				return err
			}
			var out apitypes.ContextDetail
			if done, err := a.callJSON(cmd, http.MethodGet, contextPath(name), orgQuery(org), nil, &out); done || err != nil {
				return err
			}
			c, w := &out.Context, a.out()
			fmt.Fprintf(w, "name:                  %s\nid:                    %s\ntype:                  %s\nenabled:               %t\n", c.Name, c.ID, contextType(c), c.Enabled)
			fmt.Fprintf(w, "branch restrictions:   %s\nrequired reviewers:    %s\nwait timer:            %s\nhold expiry:           %s\nminimum trust:         %s\nallow local execution: %t\n",
				joinOr(c.BranchRestrictions, "(any branch)"), joinOr(c.RequiredReviewers, "(none)"), secs(c.WaitTimerSeconds, "(none)"),
				secs(c.HoldExpirySeconds, "3600s (default)"), orDash(deref(c.MinimumTrust)), c.AllowLocalExecution)
			fmt.Fprintf(w, "trigger types:         %s\nrepo patterns:         %s\nallow untrusted:       %t\n",
				joinOr(c.TriggerTypeFilters, "(any)"), joinOr(c.RepoPatterns, "(any repository)"), c.AllowUntrusted)
			limit := "(none)"
			if c.ConcurrencyLimit != nil {
				limit = strconv.FormatInt(*c.ConcurrencyLimit, 10)
			}
			fmt.Fprintf(w, "concurrency limit:     %s\n", limit)
			strategy := c.ConcurrencyStrategy
			if strategy == "" { // an orchestrator that predates the field
				strategy = apitypes.ConcurrencyQueue
			}
			timeout := (time.Duration(apitypes.DefaultConcurrencyTimeoutMs) * time.Millisecond).String() + " (default)"
			if c.ConcurrencyTimeoutMs != nil {
				timeout = (time.Duration(*c.ConcurrencyTimeoutMs) * time.Millisecond).String()
			}
			fmt.Fprintf(w, "concurrency strategy:  %s\nconcurrency timeout:   %s\n", strategy, timeout)
			fmt.Fprintln(w, "\nbindings:")
			t := newTable(w, "SCOPE", "HOST", "CREATED")
			for _, b := range out.Bindings {
				t.row(b.ScopePattern, b.HostPattern, b.CreatedAt.Format(time.RFC3339))
			}
			t.flush()
			fmt.Fprintln(w, "\nvariables:")
			printVariables(w, out.Variables, true)
			return nil
		},
	}

	del := &cobra.Command{
		Example: "  kici-admin context delete --org acme --name release",
		Use:     "delete",
		Short:   "Delete a context with its bindings and variables",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "name", name); err != nil {
				return err
			}
			return a.deleteAndConfirm(cmd, contextPath(name), orgQuery(org), fmt.Sprintf("context %s deleted", name))
		},
	}

	for _, c := range []*cobra.Command{create, bind, setPolicy, list, show, del} {
		c.Flags().StringVar(&org, "org", "", "org id (required)")
		if c != list {
			c.Flags().StringVar(&name, "name", "", "context name")
			c.Flags().StringVar(&name, "env", "", "context name (alias of --name)")
		}
	}
	cmd.AddCommand(create, bind, setPolicy, list, show, del, a.contextOverrideCommand())
	a.addDatabaseURLFlag(cmd)
	return cmd
}

func contextType(c *apitypes.Context) string {
	if c.Type == apitypes.ContextTypeGlob {
		return "glob(" + c.GlobPattern + ")"
	}
	return string(c.Type)
}

func joinOr(l []string, empty string) string {
	if len(l) == 0 {
		return empty
	}
	return strings.Join(l, ",")
}

func secs(p *int64, none string) string {
	if p == nil {
		return none
	}
	return strconv.FormatInt(*p, 10) + "s"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
