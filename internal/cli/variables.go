package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

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
			return a.deleteAndConfirm(cmd, contextPath(args[1], "variables", args[2]), orgQuery(args[0]), fmt.Sprintf("variable %s of %s deleted", args[2], args[1]))
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
			return a.deleteAndConfirm(cmd, contextPath(name, "source-overrides", args[0]), q, fmt.Sprintf("override of %s for %s deleted from %s", args[0], rk, name))
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
