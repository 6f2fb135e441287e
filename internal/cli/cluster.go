package cli

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

// clusterCommand is `kici-admin cluster nodes [remove ID]`.
func (a *app) clusterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cluster",
		Short:   "The orchestrators sharing this database",
		Example: `  kici-admin cluster nodes`,
	}
	nodes := &cobra.Command{
		Use: "nodes",
		Short: "List every node: liveness from its heartbeat (dead nodes marked, with the age of their last heartbeat), " +
			"leases held (the leader holds \"scheduler\"), draining, agents, running jobs",
		Example: "  kici-admin cluster nodes\n  kici-admin cluster nodes --json\n  kici-admin cluster nodes remove <node-id>",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out apitypes.ClusterNodeList
			printed, err := a.callJSON(cmd, "GET", apitypes.AdminPrefix+"/cluster/nodes", nil, nil, &out)
			if err != nil || printed {
				return err
			}
			printClusterView(a.out(), out)
			return nil
		},
	}
	var force bool
	remove := &cobra.Command{
		Use:   "remove <node-id>",
		Short: "Remove a stopped node's row (a node gone for good, or rows of a restored database); a live node is refused unless --force",
		Long: `Remove a node from the registry. A node whose last heartbeat is recent is
alive and refused (stop it first): a running node adds itself back at its next
heartbeat. --force removes it anyway. The node answering the request is always
refused; remove it through another node after stopping it.`,
		Example: "  kici-admin cluster nodes remove ci-3-1a2b3c4d\n  kici-admin cluster nodes remove ci-3-1a2b3c4d --force",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if force {
				q.Set("force", "true")
			}
			var out apitypes.ClusterNodeRemoved
			printed, err := a.callJSON(cmd, "DELETE", apitypes.AdminPrefix+"/cluster/nodes/"+url.PathEscape(args[0]), q, nil, &out)
			if err != nil || printed {
				return err
			}
			fmt.Fprintf(a.out(), "node %s removed\n", out.Removed)
			return nil
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove the node even though its heartbeat is fresh")
	nodes.AddCommand(remove)
	cmd.AddCommand(nodes)
	return cmd
}

// printClusterView prints the leader line and the node table.
func printClusterView(w io.Writer, v apitypes.ClusterNodeList) {
	leader := v.Leader
	if leader == "" {
		leader = "none (no node holds the scheduler lease)"
	}
	fmt.Fprintf(w, "leader: %s\n", leader)
	printNodes(w, v.Self, v.Nodes)
}

// printNodes prints the node table; the answering node is marked "*", a
// node whose heartbeat is older than its liveness bound is "dead", and
// LOG CHUNKS says whether the node says it reads step-log chunks stored
// compressed ("compressed") or, a node of a release before that report,
// counts as reading plain ones only.
func printNodes(w io.Writer, self string, nodes []apitypes.ClusterNodeStatus) {
	t := newTable(w, "ID", "STATE", "LAST HEARTBEAT", "ADDRESS", "VERSION", "STARTED", "LEASES", "DRAINING", "AGENTS", "RUNNING JOBS", "LOG CHUNKS")
	for _, n := range nodes {
		id := n.ID
		if id == self {
			id += " *"
		}
		state := "alive"
		if !n.Alive {
			state = "dead"
		}
		started := n.StartedAt
		age := fmtDuration(time.Duration(n.HeartbeatAgeMs)*time.Millisecond) + " ago"
		leases := strings.Join(n.Leases, ",")
		if leases == "" {
			leases = "-"
		}
		// What the node reads of step-log chunks: every recent node must
		// read compressed ones before any node writes them.
		chunks := "plain only"
		if n.ReadsCompressedLogs {
			chunks = "compressed"
		}
		t.row(id, state, age, n.Address, n.Version, fmtTime(&started), leases, strconv.FormatBool(n.Draining),
			strconv.Itoa(n.AgentsConnected), strconv.Itoa(n.JobsRunning), chunks)
	}
	t.flush()
	if len(nodes) == 0 {
		fmt.Fprintln(w, "no nodes registered")
	}
}
