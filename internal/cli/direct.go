package cli

import (
	"errors"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// Direct (database) mode of the dual-mode commands (KiCI `kici-admin
// context` with --database-url / KICI_DATABASE_URL): instead of calling a
// running orchestrator, the command works on the database through
// IO.OpenDatabase (package cli/direct serves the admin routes in-process).
// This package links no server code for it: kici-admin sets no OpenDatabase
// and hands direct-mode command lines to `kici-orchestrator admin` through
// IO.DelegateDirect; a binary with neither refuses the flag.

// errNoDirectMode is the answer of --database-url in a kici-admin built
// without direct-database mode.
var errNoDirectMode = errors.New("this kici-admin is built without direct-database mode; call the orchestrator over --url instead")

// directTarget is the database a dual-mode command works on directly, or ""
// for HTTP. An orchestrator named on the command line (--url) wins over
// KICI_DATABASE_URL in the environment: that variable is also the
// orchestrator's own setting, so a shell that sourced the orchestrator's
// env file must still reach the server it names. Both flags at once is an
// error rather than a silent choice.
func (a *app) directTarget(c *cobra.Command, dbURL string) (string, error) {
	urlFlag := c.Flag("url")
	explicitURL := urlFlag != nil && urlFlag.Changed
	if dbURL != "" {
		if explicitURL {
			return "", errors.New("give either --url (an orchestrator over HTTP) or --database-url (the database directly), not both")
		}
		return dbURL, nil
	}
	if explicitURL {
		return "", nil
	}
	return strings.TrimSpace(a.io.Getenv("KICI_DATABASE_URL")), nil
}

// addDatabaseURLFlag adds --database-url to a dual-mode command group and
// switches the group to direct mode when it (or KICI_DATABASE_URL) is set.
func (a *app) addDatabaseURLFlag(cmd *cobra.Command) {
	var dbURL string
	cmd.PersistentFlags().StringVar(&dbURL, "database-url", "",
		"work directly on the database instead of over HTTP: postgres://… or sqlite:///path/kici.db (env KICI_DATABASE_URL)")
	var closeDB func() error
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		u, err := a.directTarget(c, dbURL)
		if err != nil || u == "" {
			return err
		}
		if a.io.OpenDatabase == nil {
			if a.io.DelegateDirect != nil {
				return a.io.DelegateDirect()
			}
			return errNoDirectMode
		}
		rt, tok, closeFn, err := a.io.OpenDatabase(c.Context(), u)
		if err != nil {
			return err
		}
		closeDB = closeFn
		a.client = &Client{BaseURL: "http://direct.invalid", Token: tok, HTTP: &http.Client{Transport: rt}}
		return nil
	}
	cmd.PersistentPostRunE = func(*cobra.Command, []string) error {
		if closeDB != nil {
			return closeDB()
		}
		return nil
	}
}
