package cli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/termsafe"
)

// sessionCommand is `kici-admin session list|revoke`: the web UI's
// sessions, stored in the database and valid on every node.
func (a *app) sessionCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "session",
		Short: "List and end web UI sessions (people signed in through an identity provider, or with an admin token)",
		Example: `  kici-admin session list
  kici-admin session list --user gitea:alice
  kici-admin session revoke 0b6c1f0e-…
  kici-admin session revoke --user oidc:idp.example.com:248289761001`,
	}
	var user string
	list := &cobra.Command{
		Example: "  kici-admin session list --user gitea:alice",
		Use:     "list", Short: "List web UI sessions, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var q url.Values
			if user != "" {
				q = url.Values{"subject": {user}}
			}
			var resp apitypes.WebSessionList
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/web-sessions", q, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "ID", "USER", "NAME", "KIND", "ROLE", "ROUTING KEY", "CLIENT", "SIGNED IN", "LAST SEEN")
			for _, v := range resp.Sessions {
				rk := v.RoutingKey
				if rk == "" {
					rk = "-"
				}
				role := v.Role
				if role == "" {
					role = "(token's)"
				}
				t.row(v.ID, termsafe.Line(v.Subject), termsafe.Line(v.Name), string(v.Kind), role, termsafe.Line(rk), termsafe.Line(v.Client),
					fmtTime(&v.CreatedAt), fmtTime(&v.LastSeenAt))
			}
			t.flush()
			return nil
		},
	}
	list.Flags().StringVar(&user, "user", "", "only this person's sessions (their identity, e.g. gitea:alice)")
	var revokeUser string
	revoke := &cobra.Command{
		Example: "  kici-admin session revoke 0b6c1f0e-…\n  kici-admin session revoke --user gitea:alice",
		Use:     "revoke [<session-id>]", Short: "End a session, or every session of --user, at once on every node",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && revokeUser == "":
				if done, err := a.callJSON(cmd, http.MethodDelete, apitypes.AdminPrefix+"/web-sessions/"+url.PathEscape(args[0]), nil, nil, nil); done || err != nil {
					return err
				}
				fmt.Fprintf(a.out(), "session %s revoked\n", args[0])
			case len(args) == 0 && revokeUser != "":
				var resp apitypes.WebSessionsRevoked
				if done, err := a.callJSON(cmd, http.MethodDelete, apitypes.AdminPrefix+"/web-sessions", url.Values{"subject": {revokeUser}}, nil, &resp); done || err != nil {
					return err
				}
				fmt.Fprintf(a.out(), "%d session(s) of %s revoked\n", resp.Revoked, termsafe.Line(revokeUser))
			default:
				return fmt.Errorf("give a session id or --user <identity>, not both (kici-admin session list shows them)")
			}
			return nil
		},
	}
	revoke.Flags().StringVar(&revokeUser, "user", "", "end every session of this person (their identity, e.g. gitea:alice)")
	c.AddCommand(list, revoke)
	return c
}
