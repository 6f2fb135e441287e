package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

// clusterCommand is `kici-admin cluster nodes`.
func (a *app) clusterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cluster",
		Short:   "The orchestrators sharing this database",
		Example: `  kici-admin cluster nodes`,
	}
	nodes := &cobra.Command{
		Use:     "nodes",
		Short:   "List every node: id, address, version, started, last heartbeat, draining, running jobs",
		Example: "  kici-admin cluster nodes\n  kici-admin cluster nodes --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			var out struct {
				Self  string                 `json:"self"`
				Nodes []apitypes.ClusterNode `json:"nodes"`
			}
			raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/cluster/nodes", nil, &out)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			printNodes(a.out(), out.Self, out.Nodes)
			return nil
		},
	}
	cmd.AddCommand(nodes)
	return cmd
}

// printNodes prints the node table; the answering node is marked "*".
func printNodes(w io.Writer, self string, nodes []apitypes.ClusterNode) {
	t := newTable(w, "ID", "ADDRESS", "VERSION", "STARTED", "LAST HEARTBEAT", "DRAINING", "RUNNING JOBS")
	for _, n := range nodes {
		id := n.ID
		if id == self {
			id += " *"
		}
		started, hb := n.StartedAt, n.HeartbeatAt
		t.row(id, n.Address, n.Version, fmtTime(&started), fmtTime(&hb), strconv.FormatBool(n.Draining), strconv.Itoa(n.JobsRunning))
	}
	t.flush()
	if len(nodes) == 0 {
		fmt.Fprintln(w, "no nodes registered")
	}
}
