package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"kici.dev/kici/internal/api/apitypes"
)

// notificationCommand is `kici-admin notification add|list|remove|test|
// deliveries`: notification subscriptions and their delivery attempts
// over the admin API (docs/notifications.md).
func (a *app) notificationCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "notification",
		Aliases: []string{"notifications"},
		Short:   "Manage notification subscriptions (webhook, Slack, email)",
		Long: `A subscription tells a signed webhook, a Slack-compatible incoming webhook or email
recipients how the runs of an org (optionally one source and one workflow) ended:
failed, fixed (succeeded after the previous run of the same workflow and branch
failed), succeeded, or held waiting for approval. Messages are kept in an outbox and
retried with backoff; "deliveries" shows each one's state (see docs/notifications.md).`,
	}
	var b apitypes.NotificationCreate
	var outcomes string
	add := &cobra.Command{
		Use:   "add",
		Short: "Add a subscription",
		Example: `  kici-admin notification add --org acme --channel webhook --target https://hooks.acme.example/kici --outcomes failed,fixed
  kici-admin notification add --org acme --workflow deploy --channel slack --target https://hooks.slack.com/services/T…/B…/…
  kici-admin notification add --org acme --source <source-id> --channel email --target "dev@acme.example, ops@acme.example"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if outcomes != "" {
				b.Outcomes = strings.Split(outcomes, ",")
			}
			var out apitypes.NotificationCreated
			if printed, err := a.callJSON(cmd, http.MethodPost, apitypes.AdminPrefix+"/notifications", nil, b, &out); err != nil || printed {
				return err
			}
			fmt.Fprintf(a.out(), "subscription %s: %s to %s on %s\n", out.ID, out.Channel, out.Target, strings.Join(out.Outcomes, ", "))
			if out.Secret != "" {
				fmt.Fprintf(a.out(), "signing secret (shown once; verify %s with it): %s\n", "X-KiCI-Signature-256", out.Secret)
			}
			return nil
		},
	}
	add.Flags().StringVar(&b.OrgID, "org", "", "org whose runs are selected (required)")
	add.Flags().StringVar(&b.SourceID, "source", "", "only runs of this source id")
	add.Flags().StringVar(&b.WorkflowName, "workflow", "", "only runs of this workflow")
	add.Flags().StringVar(&outcomes, "outcomes", "", "comma-separated: failed, fixed, succeeded, held (default: all)")
	add.Flags().StringVar(&b.Channel, "channel", "", "webhook, slack or email (required)")
	add.Flags().StringVar(&b.Target, "target", "", "webhook or Slack URL, or comma-separated email addresses (required)")
	add.Flags().StringVar(&b.Secret, "secret", "", "webhook signing secret, at least 16 characters (default: generated and shown once)")

	var org string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List subscriptions (URLs without their path, never secrets)",
		Example: `  kici-admin notification list --org acme`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if org != "" {
				q.Set("orgId", org)
			}
			var out apitypes.NotificationList
			if printed, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/notifications", q, nil, &out); err != nil || printed {
				return err
			}
			t := newTable(a.out(), "ID", "ORG", "SOURCE", "WORKFLOW", "OUTCOMES", "CHANNEL", "TARGET")
			for _, n := range out.Notifications {
				t.row(n.ID, n.OrgID, orDash(n.SourceID), orDash(n.WorkflowName), strings.Join(n.Outcomes, ","), n.Channel, n.Target)
			}
			t.flush()
			return nil
		},
	}
	list.Flags().StringVar(&org, "org", "", "only this org's subscriptions")

	remove := &cobra.Command{
		Use:     "remove <id>",
		Short:   "Remove a subscription and its delivery history",
		Example: `  kici-admin notification remove 6f1c…`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.deleteAndConfirm(cmd, apitypes.AdminPrefix+"/notifications/"+url.PathEscape(args[0]), nil, fmt.Sprintf("removed subscription %s", args[0]))
		},
	}
	test := &cobra.Command{
		Use:     "test <id>",
		Short:   "Send a test message (event run.test) through the outbox",
		Example: `  kici-admin notification test 6f1c…`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out apitypes.NotificationTestQueued
			if printed, err := a.callJSON(cmd, http.MethodPost, apitypes.AdminPrefix+"/notifications/"+url.PathEscape(args[0])+"/test", nil, nil, &out); err != nil || printed {
				return err
			}
			fmt.Fprintf(a.out(), "test message queued as delivery %s; see: kici-admin notification deliveries --subscription %s\n", out.DeliveryID, args[0])
			return nil
		},
	}
	var sub, run, status string
	deliveries := &cobra.Command{
		Use:   "deliveries",
		Short: "Show delivery attempts (pending, delivered, failed) with the last error",
		Example: `  kici-admin notification deliveries --subscription 6f1c…
  kici-admin notification deliveries --run <run-id> --status failed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"subscriptionId": sub, "runId": run, "status": status} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var out apitypes.NotificationDeliveryList
			if printed, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/notification-deliveries", q, nil, &out); err != nil || printed {
				return err
			}
			t := newTable(a.out(), "ID", "SUBSCRIPTION", "RUN", "OUTCOME", "CHANNEL", "STATUS", "ATTEMPTS", "NEXT", "LAST ERROR")
			for _, d := range out.Deliveries {
				last := d.LastError
				if d.LastStatusCode != 0 && last != "" {
					last = strconv.Itoa(d.LastStatusCode) + ": " + last
				}
				t.row(d.ID, d.SubscriptionID, d.RunID, d.Outcome, d.Channel, string(d.Status), strconv.Itoa(d.Attempts), fmtTime(d.NextAttemptAt),
					orDash(truncCell(last, 80)))
			}
			t.flush()
			return nil
		},
	}
	deliveries.Flags().StringVar(&sub, "subscription", "", "subscription id")
	deliveries.Flags().StringVar(&run, "run", "", "run id")
	deliveries.Flags().StringVar(&status, "status", "", "pending, delivered or failed")
	cmd.AddCommand(add, list, remove, test, deliveries)
	return cmd
}
