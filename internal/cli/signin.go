package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/auth/idp"
)

// signInCommand is `kici-admin signin check`: validates a sign-in file
// (KICI_WEB_SIGNIN_CONFIG) offline and shows which role a given identity
// would get, so an operator can try a role map before restarting.
func (a *app) signInCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "signin",
		Short: "Check the web UI's sign-in file (identity providers and the role map)",
	}
	var as string
	var groups []string
	var claims map[string]string
	check := &cobra.Command{
		Example: `  kici-admin signin check /etc/kici/signin.yaml
  kici-admin signin check /etc/kici/signin.yaml --as gitea:alice --group acme/release
  kici-admin signin check /etc/kici/signin.yaml --as oidc:idp.example.com:248289761001 --group sre --claim hd=example.com`,
		Use:   "check <file>",
		Short: "Validate a sign-in file; with --as, show the role that identity would get",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := idp.LoadConfig(args[0])
			if err != nil {
				return err
			}
			for _, p := range cfg.Providers {
				where := p.URL
				if p.Kind == auth.ProviderOIDC {
					where = p.Issuer
				}
				fmt.Fprintf(a.out(), "provider %-12s %-7s %s (callback <KICI_PUBLIC_URL>/ui/login/%s/callback)\n", p.Name, p.Kind, where, p.Name)
			}
			fmt.Fprintf(a.out(), "%d role rule(s)\n", len(cfg.Roles))
			if as == "" {
				return nil
			}
			id, err := parseIdentity(as)
			if err != nil {
				return err
			}
			id.Groups, id.Claims = groups, claims
			role, rk, ok := cfg.RoleMap().Resolve(id)
			if !ok {
				fmt.Fprintf(a.out(), "%s: refused (no rule matches)\n", as)
				return &ExitError{Code: 2}
			}
			if rk == "" {
				rk = "unscoped"
			}
			fmt.Fprintf(a.out(), "%s: role %s, %s\n", as, role, rk)
			return nil
		},
	}
	check.Flags().StringVar(&as, "as", "", "an identity to resolve: oidc:<issuer-host>:<sub>, github:<login>, gitea:<login> or gitlab:<login>")
	check.Flags().StringSliceVar(&groups, "group", nil, "a group, organisation or org/team of that identity (repeatable)")
	check.Flags().StringToStringVar(&claims, "claim", nil, "an ID-token claim of that identity, name=value (repeatable)")
	c.AddCommand(check)
	return c
}

// parseIdentity reads an identity in the form Identity.ID prints.
func parseIdentity(s string) (auth.Identity, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if ok && rest != "" {
		switch auth.ProviderKind(kind) {
		case auth.ProviderOIDC:
			if i := strings.LastIndex(rest, ":"); i > 0 && i < len(rest)-1 {
				return auth.Identity{Kind: auth.ProviderOIDC, Issuer: rest[:i], Subject: rest[i+1:]}, nil
			}
		case auth.ProviderGitHub, auth.ProviderGitea, auth.ProviderGitLab:
			return auth.Identity{Kind: auth.ProviderKind(kind), Subject: rest, Login: rest}, nil
		}
	}
	return auth.Identity{}, fmt.Errorf("--as %q: want oidc:<issuer-host>:<sub>, github:<login>, gitea:<login> or gitlab:<login>", s)
}
