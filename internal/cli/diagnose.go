package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

// secretPattern matches values that look like credentials in a report:
// key=value or "key": "value" pairs whose key names a token, secret,
// password or private key, and the password of a URL's userinfo.
var secretPattern = regexp.MustCompile(`(?i)((?:token|secret|password|passwd|private_?key|api_?key|authorization)"?\s*[:=]\s*"?)[^\s",}]+|(://[^:/@\s]+:)[^@\s]+@`)

// redact removes credentials from s: every exact occurrence of a known
// secret (the admin token in use) and anything secretPattern matches.
func redact(s string, known ...string) string {
	for _, k := range known {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[REDACTED]")
		}
	}
	return secretPattern.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretPattern.FindStringSubmatch(m)
		if sub[2] != "" {
			return sub[2] + "[REDACTED]@"
		}
		return sub[1] + "[REDACTED]"
	})
}

// diagnoseCommand is `kici-admin diagnose`.
func (a *app) diagnoseCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "diagnose",
		Short: "Print what a bug report needs: version, nodes, database, scalers, queue depth, recent errors (credentials redacted)",
		Long: `Collect, through the admin API, what an operator attaches to a bug report:
the orchestrator version, the cluster's nodes, database readiness, the scalers'
health, the dispatch queue depth and the most recent failed deliveries. Every
credential is redacted: the admin token in use, and any token, secret, password
or key value, and URL passwords. A section that cannot be read says why.`,
		Example: `  kici-admin diagnose > kici-diagnose.txt`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			diagnose(cmd.Context(), c, &buf)
			_, err = io.WriteString(a.out(), redact(buf.String(), c.Token))
			return err
		},
	}
}

// diagnose writes the report sections to w (unredacted; the caller redacts).
func diagnose(ctx context.Context, c *Client, w io.Writer) {
	section := func(name string) { fmt.Fprintf(w, "\n== %s\n", name) }
	fmt.Fprintf(w, "kici diagnose of %s\n", c.BaseURL)
	section("version")
	var health struct{ Status, Version string }
	if _, err := c.Get(ctx, "/health", nil, &health); err != nil {
		fmt.Fprintf(w, "unavailable: %v\n", err)
	} else {
		fmt.Fprintf(w, "status %s, version %s\n", health.Status, health.Version)
	}
	section("database")
	if data, code, err := c.Request(ctx, http.MethodGet, "/ready", nil, nil, nil, false); err != nil {
		fmt.Fprintf(w, "unavailable: %v\n", err)
	} else {
		fmt.Fprintf(w, "/ready: HTTP %d %s\n", code, strings.TrimSpace(string(data)))
	}
	section("nodes")
	var nodes apitypes.ClusterNodeList
	if _, err := c.Get(ctx, apitypes.AdminPrefix+"/cluster/nodes", nil, &nodes); err != nil {
		fmt.Fprintf(w, "unavailable: %v\n", err)
	} else {
		printClusterView(w, nodes)
		clusterTotals(w, nodes.Nodes)
	}
	section("runs (database, every node)")
	for _, st := range []string{"queued", "running"} {
		var n apitypes.RunCount
		if _, err := c.Get(ctx, apitypes.AdminPrefix+"/runs", url.Values{"status": {st}, "count": {"true"}}, &n); err != nil {
			fmt.Fprintf(w, "%s: unavailable: %v\n", st, err)
		} else {
			fmt.Fprintf(w, "%s: %d\n", st, n.Total)
		}
	}
	section("scalers")
	if raw, err := c.Get(ctx, apitypes.AdminPrefix+"/scalers", nil, nil); err != nil {
		fmt.Fprintf(w, "unavailable: %v\n", err)
	} else {
		printJSON(w, raw)
	}
	section("queue depth (answering node)")
	if data, code, err := c.Request(ctx, http.MethodGet, "/metrics", nil, nil, nil, true); err != nil {
		fmt.Fprintf(w, "unavailable: %v\n", err)
	} else if code != http.StatusOK {
		fmt.Fprintf(w, "unavailable: /metrics HTTP %d\n", code)
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "kici_orch_dispatch_queue_depth") || strings.HasPrefix(l, "kici_orch_agents_active") {
				fmt.Fprintln(w, l)
			}
		}
	}
	section("recent errors (failed deliveries)")
	var events struct {
		Deliveries []struct {
			DeliveryID   string `json:"deliveryId"`
			Event        string `json:"event"`
			ErrorMessage string `json:"errorMessage"`
			ReceivedAt   string `json:"receivedAt"`
		} `json:"deliveries"`
	}
	if _, err := c.Get(ctx, apitypes.AdminPrefix+"/event-log", url.Values{"status": {"failed"}, "limit": {"10"}}, &events); err != nil {
		fmt.Fprintf(w, "unavailable: %v\n", err)
	} else if len(events.Deliveries) == 0 {
		fmt.Fprintln(w, "none")
	} else {
		for _, e := range events.Deliveries {
			fmt.Fprintf(w, "%s %s %s: %s\n", e.ReceivedAt, e.Event, e.DeliveryID, e.ErrorMessage)
		}
	}
}

// clusterTotals prints the agents and running jobs of the whole cluster,
// summed over the live nodes' heartbeats, and names the dead ones.
func clusterTotals(w io.Writer, nodes []apitypes.ClusterNodeStatus) {
	agents, jobs, live := 0, 0, 0
	var dead []string
	for _, n := range nodes {
		if !n.Alive {
			dead = append(dead, fmt.Sprintf("%s (last heartbeat %s ago)", n.ID, fmtDuration(time.Duration(n.HeartbeatAgeMs)*time.Millisecond)))
			continue
		}
		live++
		agents += n.AgentsConnected
		jobs += n.JobsRunning
	}
	fmt.Fprintf(w, "cluster: %d live node(s), %d agent(s) connected, %d job(s) running\n", live, agents, jobs)
	if len(dead) > 0 {
		fmt.Fprintf(w, "dead nodes: %s (kici-admin cluster nodes remove <id> once gone for good)\n", strings.Join(dead, ", "))
	}
}
