package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/api/apitypes"
)

const contextsPath = api.AdminPrefix + "/contexts"

func contextPath(name string, rest ...string) string {
	p := contextsPath + "/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

func orgQuery(org string) url.Values { return url.Values{"orgId": {org}} }

// contextPolicyFlags are the policy flags shared by `context create` and
// `context set-policy`. Values are strings so that "" (and "null" for
// --minimum-trust) can clear a field.
type contextPolicyFlags struct {
	branches, reviewers, waitTimer, holdExpiry, minimumTrust, enabled, allowLocal string
	triggerTypes, repoPatterns, allowUntrusted                                    string
	concurrencyLimit, concurrencyStrategy, concurrencyTimeout                     string
}

func (f *contextPolicyFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.branches, "branch-restrictions", "", `branch globs as a JSON array, e.g. '["main","release/*"]' ("" clears)`)
	fl.StringVar(&f.reviewers, "required-reviewers", "", `comma-separated reviewers ("" clears: no approval)`)
	fl.StringVar(&f.waitTimer, "wait-timer", "", `wait timer in seconds ("" clears)`)
	fl.StringVar(&f.holdExpiry, "hold-expiry", "", `hold expiry in seconds ("" clears: default 3600)`)
	fl.StringVar(&f.minimumTrust, "minimum-trust", "", `"trusted" or "null"`)
	fl.StringVar(&f.enabled, "enabled", "", "true or false")
	fl.StringVar(&f.allowLocal, "allow-local-execution", "", "true or false")
	fl.StringVar(&f.triggerTypes, "trigger-types", "", `comma-separated trigger types a run must come from, e.g. push,manual ("" clears: any)`)
	fl.StringVar(&f.repoPatterns, "repo-patterns", "", `comma-separated "owner/name" globs the run's repository must match ("" clears: any)`)
	fl.StringVar(&f.allowUntrusted, "allow-untrusted", "", "true lets fork pull requests (trust tier unknown) receive this context's secrets; default false")
	fl.StringVar(&f.concurrencyLimit, "concurrency-limit", "", `at most this many jobs of the context's concurrency group queued or running at once, 1..10000 ("" clears: no limit)`)
	fl.StringVar(&f.concurrencyStrategy, "concurrency-strategy", "", `what a job does when the group is full: queue (wait its turn) or cancel-pending (wait, cancelling the group's jobs already waiting) ("" clears: queue)`)
	fl.StringVar(&f.concurrencyTimeout, "concurrency-timeout", "", `how long a job waits for a slot, a duration of 1s..24h, e.g. 30m ("" clears: default 30m)`)
}

// csvList splits a comma-separated flag value, dropping blanks.
func csvList(v string) []string {
	var l []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			l = append(l, x)
		}
	}
	return l
}

// body returns the JSON policy fields for every flag that was given.
func (f *contextPolicyFlags) body(cmd *cobra.Command) (map[string]any, error) {
	b := map[string]any{}
	ch := cmd.Flags().Changed
	if ch("branch-restrictions") {
		if f.branches == "" {
			b["branchRestrictions"] = nil
		} else {
			var l []string
			if err := json.Unmarshal([]byte(f.branches), &l); err != nil {
				return nil, fmt.Errorf(`--branch-restrictions must be a JSON array of strings, e.g. '["main"]'`)
			}
			b["branchRestrictions"] = l
		}
	}
	if ch("required-reviewers") {
		if strings.TrimSpace(f.reviewers) == "" {
			b["requiredReviewers"] = nil
		} else {
			var l []string
			for _, r := range strings.Split(f.reviewers, ",") {
				if r = strings.TrimSpace(r); r != "" {
					l = append(l, r)
				}
			}
			b["requiredReviewers"] = l
		}
	}
	for _, n := range []struct{ flag, field, v string }{{"wait-timer", "waitTimerSeconds", f.waitTimer}, {"hold-expiry", "holdExpirySeconds", f.holdExpiry}} {
		if !ch(n.flag) {
			continue
		}
		if n.v == "" || n.v == "null" {
			b[n.field] = nil
			continue
		}
		v, err := strconv.ParseInt(n.v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--%s must be a number of seconds or \"\"", n.flag)
		}
		b[n.field] = v
	}
	if ch("concurrency-limit") {
		if f.concurrencyLimit == "" || f.concurrencyLimit == "null" {
			b["concurrencyLimit"] = nil
		} else {
			v, err := strconv.ParseInt(f.concurrencyLimit, 10, 64)
			if err != nil {
				return nil, errors.New(`--concurrency-limit must be a number of jobs or ""`)
			}
			b["concurrencyLimit"] = v
		}
	}
	if ch("concurrency-strategy") {
		switch f.concurrencyStrategy {
		case "", "null":
			b["concurrencyStrategy"] = nil
		case apitypes.ConcurrencyQueue, apitypes.ConcurrencyCancelPending:
			b["concurrencyStrategy"] = f.concurrencyStrategy
		default:
			return nil, fmt.Errorf(`--concurrency-strategy must be %s, %s or ""`, apitypes.ConcurrencyQueue, apitypes.ConcurrencyCancelPending)
		}
	}
	if ch("concurrency-timeout") {
		if f.concurrencyTimeout == "" || f.concurrencyTimeout == "null" {
			b["concurrencyTimeoutMs"] = nil
		} else {
			// The API takes milliseconds; its range check (1s..24h) stays
			// the one authority, so only the form is checked here.
			d, err := time.ParseDuration(f.concurrencyTimeout)
			if err != nil || d <= 0 || d%time.Millisecond != 0 {
				return nil, errors.New(`--concurrency-timeout must be a duration such as 30m or 90s, or ""`)
			}
			b["concurrencyTimeoutMs"] = d.Milliseconds()
		}
	}
	if ch("minimum-trust") {
		switch f.minimumTrust {
		case "", "null":
			b["minimumTrust"] = nil
		case "trusted":
			b["minimumTrust"] = "trusted"
		default:
			return nil, errors.New(`--minimum-trust must be "trusted" or "null"`)
		}
	}
	for _, n := range []struct{ flag, field, v string }{{"trigger-types", "triggerTypeFilters", f.triggerTypes}, {"repo-patterns", "repoPatterns", f.repoPatterns}} {
		if !ch(n.flag) {
			continue
		}
		if l := csvList(n.v); l != nil {
			b[n.field] = l
		} else {
			b[n.field] = nil
		}
	}
	for _, n := range []struct{ flag, field, v string }{{"enabled", "enabled", f.enabled}, {"allow-local-execution", "allowLocalExecution", f.allowLocal},
		{"allow-untrusted", "allowUntrusted", f.allowUntrusted}} {
		if !ch(n.flag) {
			continue
		}
		v, err := strconv.ParseBool(n.v)
		if err != nil {
			return nil, fmt.Errorf("--%s must be true or false", n.flag)
		}
		b[n.field] = v
	}
	return b, nil
}

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
			if done, err := a.callJSON(cmd, http.MethodDelete, contextPath(name), orgQuery(org), nil, nil); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "context %s deleted\n", name)
			return nil
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
	return c.Type
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

func printVariables(w io.Writer, vs []apitypes.ContextVariable, values bool) {
	t := newTable(w, "KEY", "VALUE", "LOCKED", "UPDATED")
	for _, v := range vs {
		val := "(hidden; --values shows it)"
		if values {
			val = v.Value
		}
		t.row(v.Key, val, strconv.FormatBool(v.Locked), v.UpdatedAt.Format(time.RFC3339))
	}
	t.flush()
}

// variableCommand is `kici-admin variable list|set|delete` (KiCI
// `kici-admin variable`): org-level variables of a context.
func (a *app) variableCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "variable",
		Short: "Manage the variables of a context (plain configuration, not secrets)",
		Example: `  kici-admin variable set acme release REGION eu --locked
  kici-admin variable list acme release --values
  kici-admin variable delete acme release REGION`,
	}
	var values bool
	list := &cobra.Command{
		Example: "  kici-admin variable list acme release --values",
		Use:     "list <org> <context>",
		Short:   "List a context's variables (values only with --values)",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out apitypes.ContextVariableList
			if done, err := a.callJSON(cmd, http.MethodGet, contextPath(args[1], "variables"), orgQuery(args[0]), nil, &out); done || err != nil {
				return err
			}
			printVariables(a.out(), out.Variables, values)
			return nil
		},
	}
	list.Flags().BoolVar(&values, "values", false, "show values")

	var locked, fromStdin bool
	set := &cobra.Command{
		Example: "  kici-admin variable set acme release REGION eu --locked\n  printf %s \"$VALUE\" | kici-admin variable set acme release CONFIG --from-stdin",
		Use:     "set <org> <context> <key> [value]",
		Short:   "Set (upsert) a variable from the argument or --from-stdin; --locked protects it from source overrides",
		Args:    cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v string
			switch {
			case fromStdin && len(args) == 4:
				return errors.New("give the value as an argument or --from-stdin, not both")
			case fromStdin:
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
				if err != nil {
					return fmt.Errorf("reading stdin: %w", err)
				}
				v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			case len(args) == 4:
				v = args[3]
			default:
				return errors.New("give the value as an argument or --from-stdin")
			}
			body := map[string]any{"value": v, "locked": locked}
			if done, err := a.callJSON(cmd, http.MethodPut, contextPath(args[1], "variables", args[2]), orgQuery(args[0]), body, nil); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "variable %s of %s set\n", args[2], args[1])
			return nil
		},
	}
	set.Flags().BoolVar(&locked, "locked", false, "never overridden by a source override")
	set.Flags().BoolVar(&fromStdin, "from-stdin", false, "read the value from stdin")

	del := &cobra.Command{
		Example: "  kici-admin variable delete acme release REGION",
		Use:     "delete <org> <context> <key>",
		Short:   "Delete a variable",
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := a.callJSON(cmd, http.MethodDelete, contextPath(args[1], "variables", args[2]), orgQuery(args[0]), nil, nil); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "variable %s of %s deleted\n", args[2], args[1])
			return nil
		},
	}
	cmd.AddCommand(list, set, del)
	a.addDatabaseURLFlag(cmd)
	return cmd
}

// contextOverrideCommand is `kici-admin context override set|list|delete`:
// source overrides replace a context's unlocked variable for the runs of
// one source (routing key). kici's command; KiCI has only the store
// methods.
func (a *app) contextOverrideCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "override",
		Short: "Manage source overrides: per-source values of a context's variables",
		Long: `A source override replaces the value of a context variable for runs coming from one
source (named by its routing key, e.g. generic:acme:<id>). A variable set with --locked
is never overridden.`,
		Example: `  kici-admin context override set --org acme --name release --routing-key generic:acme:4f1c REGION us
  kici-admin context override list --org acme --name release
  kici-admin context override delete --org acme --name release --routing-key generic:acme:4f1c REGION`,
	}
	var org, name, rk string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List a context's source overrides (of one source with --routing-key)",
		Example: "  kici-admin context override list --org acme --name release --routing-key generic:acme:4f1c",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "name", name); err != nil {
				return err
			}
			q := orgQuery(org)
			if rk != "" {
				q.Set("routingKey", rk)
			}
			var out apitypes.ContextSourceOverrideList
			if done, err := a.callJSON(cmd, http.MethodGet, contextPath(name, "source-overrides"), q, nil, &out); done || err != nil {
				return err
			}
			t := newTable(a.out(), "ROUTING KEY", "KEY", "VALUE", "UPDATED")
			for _, o := range out.Overrides {
				t.row(o.RoutingKey, o.Key, o.Value, o.UpdatedAt.Format(time.RFC3339))
			}
			t.flush()
			return nil
		},
	}
	set := &cobra.Command{
		Use:     "set <key> <value>",
		Short:   "Set (upsert) the override of one variable for one source",
		Example: "  kici-admin context override set --org acme --name release --routing-key generic:acme:4f1c REGION us",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags("org", org, "name", name, "routing-key", rk); err != nil {
				return err
			}
			q := orgQuery(org)
			q.Set("routingKey", rk)
			if done, err := a.callJSON(cmd, http.MethodPut, contextPath(name, "source-overrides", args[0]), q, map[string]string{"value": args[1]}, nil); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "override of %s for %s set on %s\n", args[0], rk, name)
			return nil
		},
	}
	del := &cobra.Command{
		Use:     "delete <key>",
		Short:   "Delete the override of one variable for one source",
		Example: "  kici-admin context override delete --org acme --name release --routing-key generic:acme:4f1c REGION",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags("org", org, "name", name, "routing-key", rk); err != nil {
				return err
			}
			q := orgQuery(org)
			q.Set("routingKey", rk)
			if done, err := a.callJSON(cmd, http.MethodDelete, contextPath(name, "source-overrides", args[0]), q, nil, nil); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "override of %s for %s deleted from %s\n", args[0], rk, name)
			return nil
		},
	}
	for _, c := range []*cobra.Command{list, set, del} {
		c.Flags().StringVar(&org, "org", "", "org id (required)")
		c.Flags().StringVar(&name, "name", "", "context name (required)")
		c.Flags().StringVar(&name, "env", "", "context name (alias of --name)")
		c.Flags().StringVar(&rk, "routing-key", "", "the source's routing key")
	}
	cmd.AddCommand(list, set, del)
	return cmd
}
