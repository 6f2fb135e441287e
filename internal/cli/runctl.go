package cli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
	"kici.dev/kici/internal/api/apitypes"
)

// runsCancelCommand is `kici-admin runs cancel <run-id> [--force]`.
func (a *app) runsCancelCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "cancel <run-id>",
		Short: "Cancel a run: SIGTERM, grace period, SIGKILL, then cleanup steps (--force: SIGKILL, no cleanup)",
		Long: `Cancel a run. Jobs that have not started are cancelled at once; each running
job's agent sends SIGTERM to the step's process group, waits the job's
gracePeriod (default 10 s, at most 30 s), SIGKILLs what is left, then runs the
job's cleanup steps (steps with when: on-cancel or always). The run shows
"cancelling" until every agent confirms. --force SIGKILLs at once and skips the
cleanup steps. Cancelling a run that is already cancelling escalates to
SIGKILL. A finished run cannot be cancelled (exit 1, HTTP 409).`,
		Example: `  kici-admin runs cancel <run-id>
  kici-admin runs cancel <run-id> --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp apitypes.CancelResponse
			if done, err := a.callJSON(cmd, http.MethodPost, apitypes.AdminPrefix+"/runs/"+url.PathEscape(args[0])+"/cancel", nil, apitypes.CancelRequest{Force: force}, &resp); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "run %s: %s\n", resp.RunID, resp.Status)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "SIGKILL at once and skip cleanup steps")
	return cmd
}

// orchestratorCommand is `kici-admin orchestrator drain|resume`.
func (a *app) orchestratorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orchestrator",
		Short: "Control the orchestrator (drain for upgrades)",
		Example: `  kici-admin orchestrator drain
  kici-admin orchestrator drain --status
  kici-admin orchestrator resume`,
	}
	var status bool
	var node string
	drain := &cobra.Command{
		Use:   "drain",
		Short: "Stop handing out jobs on every node (--node: one node): new jobs stay queued, running jobs finish (--status: only show each node's state)",
		Example: `  kici-admin orchestrator drain
  kici-admin orchestrator drain --node <node-id>
  kici-admin orchestrator drain --status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status {
				return a.drainCall(cmd, "", "")
			}
			return a.drainCall(cmd, "drain", node)
		},
	}
	drain.Flags().BoolVar(&status, "status", false, "show each node's drain state without changing anything")
	drain.Flags().StringVar(&node, "node", "", "drain only this node (an id from kici-admin cluster nodes)")
	resume := &cobra.Command{
		Use:     "resume",
		Short:   "Leave drain mode on every node (--node: one node): queued jobs are dispatched again",
		Example: "  kici-admin orchestrator resume\n  kici-admin orchestrator resume --node <node-id>",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.drainCall(cmd, "resume", node) },
	}
	resume.Flags().StringVar(&node, "node", "", "resume only this node")
	cmd.AddCommand(drain, resume)
	return cmd
}

// drainCall GETs (action "") or POSTs the drain state and prints it.
func (a *app) drainCall(cmd *cobra.Command, action, node string) error {
	c, err := a.api()
	if err != nil {
		return err
	}
	var st apitypes.ClusterDrainStatus
	var raw []byte
	if action == "" {
		raw, err = c.Get(cmd.Context(), apitypes.AdminPrefix+"/orchestrator/drain", nil, &st)
	} else {
		raw, err = c.Post(cmd.Context(), apitypes.AdminPrefix+"/orchestrator/drain", apitypes.DrainRequest{Action: action, Node: node}, &st)
	}
	if err != nil {
		return err
	}
	if a.json {
		printJSON(a.out(), raw)
		return nil
	}
	state := "accepting jobs"
	if st.Draining {
		state = "draining"
	}
	// The answering node's own state, then (with a node registry) the
	// cluster's total from the database and each node's row.
	fmt.Fprintf(a.out(), "orchestrator: %s, %d job(s) running\n", state, st.JobsRunning)
	if st.Nodes == nil {
		return nil
	}
	live, draining := 0, 0
	for _, n := range st.Nodes {
		if n.Alive {
			live++
			if n.Draining {
				draining++
			}
		}
	}
	total := 0
	if st.Cluster != nil {
		total = st.Cluster.JobsRunning
	}
	fmt.Fprintf(a.out(), "cluster: %d of %d live node(s) draining, %d job(s) running on live nodes\n", draining, live, total)
	printNodes(a.out(), st.Node, st.Nodes)
	return nil
}

// runsRerunCommand is `kici-admin runs rerun <run-id>`.
func (a *app) runsRerunCommand() *cobra.Command {
	var failed bool
	cmd := &cobra.Command{
		Use:   "rerun <run-id>",
		Short: "Run a finished run's workflow again at the same commit (new run with parentRunId)",
		Long: `Create a new run of the same workflow at the same commit as a finished run. The
lock file is read again at that commit and every job runs again; the new run's
parentRunId names the original. A run that has not finished is refused (HTTP
409); a run whose source or workflow is gone cannot be rerun (HTTP 422).

--failed runs again only the jobs that did not succeed and every job that
depends on them; the other jobs are carried over as succeeded (errorMessage
"carried over from run <id>"), with their outputs.`,
		Example: `  kici-admin runs rerun <run-id>
  kici-admin runs rerun <run-id> --failed
  kici-admin runs rerun <run-id> --quiet   # print only the new run id`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			var resp apitypes.RerunResponse
			path := apitypes.AdminPrefix + "/runs/" + url.PathEscape(args[0]) + "/rerun"
			if failed {
				path += "?failed=true"
			}
			raw, err := c.Post(cmd.Context(), path, struct{}{}, &resp)
			if err != nil {
				return err
			}
			switch {
			case a.json:
				printJSON(a.out(), raw)
			case a.quiet:
				fmt.Fprintln(a.out(), resp.Run.RunID)
			default:
				fmt.Fprintf(a.out(), "run %s created (rerun of %s at %s)\n", resp.Run.RunID, resp.ParentRunID, resp.Run.SHA)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&failed, "failed", false, "rerun only the jobs that did not succeed and their dependents")
	return cmd
}
