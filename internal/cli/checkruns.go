package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
	"kici.dev/kici/internal/api/apitypes"
)

// checkRunCommand is `kici-admin check-run list --sha <sha>` (KiCI's
// command of the same name): what kici posted to the forge for each job
// of a commit, its state and the last delivery result, over the admin API
// or, with --database-url, directly on the database.
func (a *app) checkRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "check-run",
		Aliases: []string{"check-runs"},
		Short:   "Show the check runs and commit statuses posted to forges",
		Long: `kici reports every job of a forge's run back to the forge: a GitHub check run per
job for GitHub App sources, a commit status per job for GitHub token sources and for
Gitea, Forgejo, Gogs and GitLab sources (see docs/forge-status.md).

"list" shows, per job: the check name (or status context), the state kici wants the
forge to show (WANT), the state the forge last accepted (POSTED) and the delivery
result: delivered, pending (a newer state waits for its turn: one call per check
every 5 s), retrying (the forge failed or rate-limited; ATTEMPTS and NEXT say when
the next try is) or failed (the forge refused it with a 4xx; LAST ERROR says why).`,
	}
	var sha, runID string
	list := &cobra.Command{
		Use:   "list",
		Short: "List what was posted for a commit (--sha) or a run (--run)",
		Example: `  kici-admin check-run list --sha 3f2a9c…
  kici-admin check-run list --run <run-id> --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sha == "" && runID == "" {
				return fmt.Errorf("--sha or --run is required")
			}
			q := url.Values{}
			if sha != "" {
				q.Set("sha", sha)
			}
			if runID != "" {
				q.Set("runId", runID)
			}
			var out struct {
				CheckRuns []apitypes.CheckRunView `json:"checkRuns"`
			}
			raw, err := a.call(cmd, http.MethodGet, apitypes.AdminPrefix+"/check-runs", q, nil, &out)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			t := newTable(a.out(), "NAME", "PROVIDER", "REPO", "WANT", "POSTED", "DELIVERY", "ATTEMPTS", "NEXT", "LAST ERROR", "JOB")
			for _, c := range out.CheckRuns {
				last := c.LastError
				if c.LastStatusCode != 0 && last != "" {
					last = "HTTP " + strconv.Itoa(c.LastStatusCode) + ": " + last
				}
				t.row(c.Name, c.Provider, c.Repo, c.DesiredState, orDash(c.PostedState), string(c.Delivery), strconv.Itoa(c.Attempts),
					fmtTime(c.NextAttemptAt), orDash(truncCell(last, 80)), c.JobID)
			}
			t.flush()
			if len(out.CheckRuns) == 0 {
				fmt.Fprintln(a.io.Stderr, "nothing posted for that commit or run")
			}
			return nil
		},
	}
	list.Flags().StringVar(&sha, "sha", "", "commit SHA")
	list.Flags().StringVar(&runID, "run", "", "run id")
	cmd.AddCommand(list)
	a.addDatabaseURLFlag(cmd)
	return cmd
}

// truncCell cuts s to n runes for a table cell.
func truncCell(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
