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

// addDatabaseURLFlag adds --database-url to a dual-mode command group and
// switches the group to direct mode when it (or KICI_DATABASE_URL) is set.
func (a *app) addDatabaseURLFlag(cmd *cobra.Command) {
	var dbURL string
	cmd.PersistentFlags().StringVar(&dbURL, "database-url", "",
		"work directly on the database instead of over HTTP: postgres://… or sqlite:///path/kici.db (env KICI_DATABASE_URL)")
	var closeDB func() error
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		u := dbURL
		if u == "" {
			u = strings.TrimSpace(a.io.Getenv("KICI_DATABASE_URL"))
		}
		if u == "" {
			return nil
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
