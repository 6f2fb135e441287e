package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// migrateCommand is `kici-admin migrate status|up|down-to VERSION`: the
// schema commands of docs/upgrade.md. They need the store and its drivers,
// which kici-admin does not link, so kici-admin hands the command line to
// `kici-orchestrator admin` (IO.DelegateDirect), which serves it through
// IO.Migrate with the orchestrator's own configuration (KICI_DATABASE_URL,
// KICI_DATA_DIR).
func (a *app) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate status|up|down-to VERSION",
		Short: "Report, apply or roll back the database schema (upgrades and rollbacks, docs/upgrade.md)",
		Long: `Work on the database the environment configures for the orchestrator
(KICI_DATABASE_URL, else the SQLite database in KICI_DATA_DIR):
  status        print the schema version and this release's; exit 1 when they differ
  up            apply this release's pending migrations (an orchestrator also does at start)
  down-to V     roll the schema back to version V before starting an older release
Runs in kici-orchestrator (installed beside kici-admin), as
` + "`kici-orchestrator migrate`" + ` does.`,
		Example: `  kici-admin migrate status
  kici-admin migrate down-to 18`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.io.Migrate == nil {
				if a.io.DelegateDirect != nil {
					return a.io.DelegateDirect()
				}
				return errors.New("this kici-admin cannot reach the database: run `kici-orchestrator migrate` with the orchestrator's environment")
			}
			if code := a.io.Migrate(args, a.io.Stdout, a.io.Stderr); code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
}
