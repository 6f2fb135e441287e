package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/decisiontrace"
	"kici.dev/kici/internal/provider"
)

// readValue resolves a flag value: "@path" reads a file, "-" stdin is not
// supported (secrets must not be echoed), anything else is literal.
func readValue(v string) (string, error) {
	if p, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	return v, nil
}

func (a *app) sourceAddGitHubCommand() *cobra.Command {
	var org, name, appID, key, tokenEnv, secret, apiURL string
	var rpm int
	var tok forgeToken
	var tokens tokenOccurrences
	cmd := &cobra.Command{
		Use:   "github",
		Short: "Register a GitHub source (a GitHub App, or an access token)",
		Long: `Register a GitHub source. With --app-id and --private-key the orchestrator checks
the App's credentials (GET /app) and mints installation tokens per event; with
--forge-token (or --forge-token-from-env) it uses that token. The webhook URL
to configure on GitHub is printed, with the webhook secret (generated unless
given).

--token is kici-admin's admin token, as everywhere. It used to name the GitHub
token here: without --forge-token or an App, a --token value that is not an
admin token (kadm_…) is still read as the GitHub token. Write --forge-token.`,
		Example: `  kici-admin source add github --org acme --name gh --app-id 12345 --private-key @app.pem
  kici-admin source add github --org acme --name gh --forge-token-from-env GITHUB_TOKEN --api-url https://ghe.example.com/api/v3
  kici-admin --url https://ci.example.com --token kadm_... source add github --org acme --name gh --forge-token @token.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokenEnv != "" && tok.fromEnv == "" {
				tok.fromEnv = tokenEnv // --token-from-env, the old name
			}
			legacy, err := a.sortTokens(cmd, &tokens, tok.given() || appID != "" || key != "")
			if err != nil {
				return err
			}
			if legacy != "" {
				tok.value = legacy
			}
			req := apitypes.CreateGitHubSourceRequest{Provider: provider.GitHub, OrgID: org, Name: name, APIBaseURL: apiURL, RateLimitRPM: rpm}
			if appID != "" {
				n, err := strconv.ParseInt(appID, 10, 64)
				if err != nil || n <= 0 {
					return fmt.Errorf("--app-id %q: must be a positive integer", appID)
				}
				req.AppID = n
			}
			if req.PrivateKey, err = readValue(key); err != nil {
				return fmt.Errorf("--private-key: %w", err)
			}
			if req.Token, err = tok.resolve(a.io.Getenv); err != nil {
				return err
			}
			if req.WebhookSecret, err = readValue(secret); err != nil {
				return fmt.Errorf("--webhook-secret: %w", err)
			}
			req.WebhookSecret = strings.TrimSpace(req.WebhookSecret)
			c, err := a.api()
			if err != nil {
				return err
			}
			var resp struct {
				ID         string              `json:"id"`
				RoutingKey string              `json:"routingKey"`
				WebhookURL string              `json:"webhookUrl"`
				Source     apitypes.SourceView `json:"source"`
			}
			if done, err := a.callJSON(cmd, http.MethodPost, apitypes.AdminPrefix+"/sources", nil, req, &resp); done || err != nil {
				return err
			}
			if a.quiet {
				fmt.Fprintln(a.out(), resp.ID)
				return nil
			}
			w := a.out()
			fmt.Fprintf(w, "Created github source %q in org %q\n", name, org)
			fmt.Fprintf(w, "  id:          %s\n", resp.ID)
			fmt.Fprintf(w, "  routing key: %s\n", resp.RoutingKey)
			fmt.Fprintf(w, "  webhook:     %s%s (content type application/json)\n", c.BaseURL, resp.WebhookURL)
			fmt.Fprintf(w, "Show the webhook secret with: kici-admin source get-webhook-secret %s\n", resp.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "organisation id (required)")
	f.StringVar(&name, "name", "", "source name, unique in the org (required)")
	f.StringVar(&appID, "app-id", "", "GitHub App id")
	f.StringVar(&key, "private-key", "", "GitHub App private key PEM, or @file")
	tok.add(f, "GitHub")
	// The old names of --forge-token / --forge-token-from-env. Defining
	// --token here hides the global one from the parser: sortTokens tells
	// the two uses apart.
	f.VarP(&tokens, "token", "t", "admin bearer token (env KICI_ADMIN_TOKEN); the GitHub token is --forge-token (without --forge-token or an App, a value that is not a kadm_ admin token is still read as the GitHub token, its old meaning)")
	f.StringVar(&tokenEnv, "token-from-env", "", "old name of --forge-token-from-env")
	_ = f.MarkHidden("token-from-env")
	f.StringVar(&secret, "webhook-secret", "", "webhook secret (≥ 16 chars) or @file; generated when empty")
	f.StringVar(&apiURL, "api-url", "", "REST API base URL (default https://api.github.com)")
	f.IntVar(&rpm, "rate-limit", 0, "deliveries per minute (0 = default 600, -1 = unlimited)")
	_ = cmd.MarkFlagRequired("org")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func (a *app) sourceSecretsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Rotate webhook secrets: list, add a new one (old ones stay valid), revoke",
		Example: `  kici-admin source secrets rotate <source-id>
  kici-admin source secrets list <source-id>
  kici-admin source secrets revoke <source-id> <secret-id>`,
	}
	path := func(id string) string {
		return apitypes.AdminPrefix + "/generic-sources/" + url.PathEscape(id) + "/webhook-secrets"
	}
	list := &cobra.Command{
		Use: "list <source-id>", Short: "List a source's webhook secrets (ids and dates)", Args: cobra.ExactArgs(1),
		Example: "  kici-admin source secrets list <source-id>",
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct {
				Secrets []apitypes.SecretView `json:"secrets"`
			}
			if done, err := a.callJSON(cmd, http.MethodGet, path(args[0]), nil, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "ID", "CREATED", "REVOKED")
			for _, s := range resp.Secrets {
				t.row(s.ID, fmtTime(&s.CreatedAt), fmtTime(s.RevokedAt))
			}
			t.flush()
			return nil
		},
	}
	rotate := &cobra.Command{
		Use: "rotate <source-id>", Short: "Add a new webhook secret and print it; the old ones stay valid until revoked", Args: cobra.ExactArgs(1),
		Example: "  kici-admin source secrets rotate <source-id>",
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct {
				ID            string `json:"id"`
				WebhookSecret string `json:"webhookSecret"`
			}
			if done, err := a.callJSON(cmd, http.MethodPost, path(args[0]), nil, map[string]any{}, &resp); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "New secret %s:\n%s\nConfigure it on the sender, then revoke the old one with: kici-admin source secrets revoke %s <old-secret-id>\n",
				resp.ID, resp.WebhookSecret, args[0])
			return nil
		},
	}
	revoke := &cobra.Command{
		Use: "revoke <source-id> <secret-id>", Short: "Revoke a webhook secret", Args: cobra.ExactArgs(2),
		Example: "  kici-admin source secrets revoke <source-id> <secret-id>",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.deleteAndConfirm(cmd, path(args[0])+"/"+url.PathEscape(args[1]), nil, fmt.Sprintf("Revoked secret %s", args[1]))
		},
	}
	cmd.AddCommand(list, rotate, revoke)
	return cmd
}

func (a *app) eventLogCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "event-log",
		Short: "Inspect received deliveries and why they started (or did not start) runs",
		Example: `  kici-admin event-log list --status failed
  kici-admin event-log show <delivery-id> --payload
  kici-admin event-log rejected`,
	}
	var f struct{ org, rk, event, action, status, delivery, from, to string }
	var limit, offset int
	list := &cobra.Command{
		Use: "list", Short: "List deliveries, newest first", Args: cobra.NoArgs,
		Example: "  kici-admin event-log list --status lockfile_missing --limit 20\n  kici-admin event-log list --event push --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"orgId": f.org, "routingKey": f.rk, "event": f.event, "action": f.action,
				"status": f.status, "deliveryId": f.delivery, "from": f.from, "to": f.to} {
				if v != "" {
					q.Set(k, v)
				}
			}
			q.Set("limit", strconv.Itoa(limit))
			q.Set("offset", strconv.Itoa(offset))
			var resp struct {
				Deliveries []apitypes.EventLogView `json:"deliveries"`
				Total      int                     `json:"total"`
			}
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/event-log", q, nil, &resp); done || err != nil {
				return err
			}
			if a.quiet {
				for _, d := range resp.Deliveries {
					fmt.Fprintln(a.out(), d.DeliveryID)
				}
				return nil
			}
			t := newTable(a.out(), "DELIVERY", "EVENT", "ACTION", "REPO", "STATUS", "MATCHED", "RECEIVED")
			for _, d := range resp.Deliveries {
				t.row(d.DeliveryID, d.Event, dash(d.Action), dash(d.RepoIdentifier), string(d.Status), strconv.Itoa(d.MatchedCount), fmtTime(&d.ReceivedAt))
			}
			t.flush()
			fmt.Fprintf(a.out(), "%d of %d\n", len(resp.Deliveries), resp.Total)
			return nil
		},
	}
	fl := list.Flags()
	fl.StringVar(&f.org, "org", "", "organisation id")
	fl.StringVar(&f.rk, "routing-key", "", "routing key")
	fl.StringVar(&f.event, "event", "", "event name")
	fl.StringVar(&f.action, "action", "", "event action")
	fl.StringVar(&f.status, "status", "", "received, processed, duplicate, lockfile_missing or failed")
	fl.StringVar(&f.delivery, "delivery-id", "", "delivery id substring")
	fl.StringVar(&f.from, "from", "", "received at or after (RFC 3339)")
	fl.StringVar(&f.to, "to", "", "received at or before (RFC 3339)")
	fl.IntVar(&limit, "limit", 50, "rows (1–200)")
	fl.IntVar(&offset, "offset", 0, "rows to skip")

	var showOrg string
	var payload bool
	show := &cobra.Command{
		Use: "show <delivery-id>", Short: "Show one delivery and its decision trace", Args: cobra.ExactArgs(1),
		Example: "  kici-admin event-log show github:12345:0f1e… --payload",
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if showOrg != "" {
				q.Set("orgId", showOrg)
			}
			if payload {
				q.Set("includePayload", "true")
			}
			var resp struct {
				Delivery         apitypes.EventLogView `json:"delivery"`
				Trace            *apitypes.Trace       `json:"trace"`
				ErrorMessage     string                `json:"errorMessage"`
				Payload          json.RawMessage       `json:"payload"`
				PayloadReadError string                `json:"payloadReadError"`
			}
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/event-log/"+url.PathEscape(args[0]), q, nil, &resp); done || err != nil {
				return err
			}
			printDelivery(a, &resp.Delivery, resp.Trace, resp.ErrorMessage)
			if payload {
				if resp.PayloadReadError != "" {
					fmt.Fprintf(a.out(), "\nPayload: %s\n", resp.PayloadReadError)
				} else {
					fmt.Fprintln(a.out(), "\nPayload:")
					printJSON(a.out(), resp.Payload)
				}
			}
			return nil
		},
	}
	show.Flags().StringVar(&showOrg, "org", "", "organisation id")
	show.Flags().BoolVar(&payload, "payload", false, "also print the payload (needs event_log.read_payload)")

	var src string
	rejected := &cobra.Command{
		Use: "rejected", Short: "List refused deliveries (bad signature, over the cap, rate limited…)", Args: cobra.NoArgs,
		Example: "  kici-admin event-log rejected --source <source-id>",
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if src != "" {
				q.Set("sourceId", src)
			}
			var resp struct {
				Rejected []apitypes.RejectedDelivery `json:"rejected"`
			}
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/rejected-deliveries", q, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "RECEIVED", "SOURCE", "ROUTE", "STATUS", "REASON", "DELIVERY", "FROM")
			for _, r := range resp.Rejected {
				t.row(fmtTime(&r.ReceivedAt), r.SourceID, r.Route, strconv.Itoa(r.StatusCode), r.Reason, dash(r.DeliveryHeader), dash(r.RemoteAddr))
			}
			t.flush()
			return nil
		},
	}
	rejected.Flags().StringVar(&src, "source", "", "only this source id")
	cmd.AddCommand(list, show, rejected)
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printDelivery prints an event-log record and its decision trace.
func printDelivery(a *app, d *apitypes.EventLogView, tr *apitypes.Trace, errMsg string) {
	w := a.out()
	fmt.Fprintf(w, "Delivery:  %s\n", d.DeliveryID)
	fmt.Fprintf(w, "Event:     %s (action %s) from %s/%s\n", d.Event, dash(d.Action), dash(string(d.Provider)), d.Source)
	fmt.Fprintf(w, "Status:    %s\n", d.Status)
	if d.RepoIdentifier != "" || d.Ref != "" {
		fmt.Fprintf(w, "Repo:      %s  ref %s\n", dash(d.RepoIdentifier), dash(d.Ref))
	}
	fmt.Fprintf(w, "Received:  %s  processed %s\n", fmtTime(&d.ReceivedAt), fmtTime(d.ProcessedAt))
	fmt.Fprintf(w, "Payload:   %d bytes, sha256 %s%s\n", d.PayloadSizeBytes, d.PayloadHash, map[bool]string{true: " (omitted: " + d.PayloadOmittedReason + ")"}[d.PayloadOmitted])
	if errMsg != "" {
		fmt.Fprintf(w, "Error:     %s\n", errMsg)
	}
	if len(d.RunIDs) > 0 {
		fmt.Fprintf(w, "Runs:      %s\n", strings.Join(d.RunIDs, ", "))
	}
	if tr == nil {
		fmt.Fprintln(w, "Trace:     (not processed yet)")
		return
	}
	fmt.Fprintf(w, "Summary:   %s\n", tr.Summary)
	if tr.SHA != "" {
		fmt.Fprintf(w, "Lock ref:  %s\n", tr.SHA)
	}
	if len(tr.ChangedFiles) > 0 {
		fmt.Fprintf(w, "Changed:   %s\n", strings.Join(tr.ChangedFiles, ", "))
	}
	decisiontrace.Print(w, tr.Workflows)
	if len(tr.Errors) > 0 {
		fmt.Fprintln(w)
	}
	for _, e := range tr.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func (a *app) eventCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "event", Short: "Emit kici events (kici_event triggers)"}
	var payloadFile, payload, repo, rk, org string
	emit := &cobra.Command{
		Use:   "emit <event-name>",
		Short: "Emit a kici_event; registered workflows whose kici_event trigger matches start",
		Example: `  kici-admin event emit deploy --payload '{"env":"prod"}'
  kici-admin event emit deploy --payload-file event.json --source-repo acme/api`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if payloadFile != "" && payload != "" {
				return errors.New("give --payload or --payload-file, not both")
			}
			body := payload
			if payloadFile != "" {
				b, err := os.ReadFile(payloadFile)
				if err != nil {
					return err
				}
				body = string(b)
			}
			if body == "" {
				body = "{}"
			}
			if !json.Valid([]byte(body)) {
				return errors.New("the payload is not valid JSON")
			}
			var resp struct {
				EventID string `json:"eventId"`
			}
			req := apitypes.EmitRequest{EventName: args[0], Payload: json.RawMessage(body), SourceRepo: repo, SourceRoutingKey: rk, OrgID: org}
			if done, err := a.callJSON(cmd, http.MethodPost, apitypes.AdminPrefix+"/events/emit", nil, req, &resp); done || err != nil {
				return err
			}
			if a.quiet {
				fmt.Fprintln(a.out(), resp.EventID)
				return nil
			}
			fmt.Fprintf(a.out(), "Emitted %s (event id %s)\nSee what it started with: kici-admin event-log show %s\n", args[0], resp.EventID, resp.EventID)
			return nil
		},
	}
	emit.Flags().StringVar(&payload, "payload", "", "payload JSON object")
	emit.Flags().StringVar(&payloadFile, "payload-file", "", "file holding the payload JSON object")
	emit.Flags().StringVar(&repo, "source-repo", "", "repository the event comes from (owner/repo)")
	emit.Flags().StringVar(&rk, "source-routing-key", "", "routing key the event comes from")
	emit.Flags().StringVar(&org, "org", "", "only match this organisation's registrations")
	cmd.AddCommand(emit)
	return cmd
}

func (a *app) registrationCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "registration", Short: "Inspect the registration index (default-branch workflows for event, schedule and lifecycle triggers)"}
	var org, rk, repo, typ string
	list := &cobra.Command{
		Use: "list", Short: "List registrations", Args: cobra.NoArgs,
		Example: "  kici-admin registration list --trigger-type schedule",
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"org": org, "routingKey": rk, "repoIdentifier": repo, "triggerType": typ} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var resp struct {
				Registrations []apitypes.Registration `json:"registrations"`
			}
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/registrations", q, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "ID", "SOURCE", "REPO", "WORKFLOW", "TRIGGERS", "COMMIT", "REGISTERED")
			for _, g := range resp.Registrations {
				sha := g.SHA
				if len(sha) > 12 {
					sha = sha[:12]
				}
				t.row(g.ID, dash(g.SourceID), g.RepoIdentifier, g.WorkflowName, strings.Join(g.TriggerTypes, ","), dash(sha), fmtTime(&g.CreatedAt))
			}
			t.flush()
			return nil
		},
	}
	list.Flags().StringVar(&org, "org", "", "organisation id")
	list.Flags().StringVar(&rk, "routing-key", "", "routing key")
	list.Flags().StringVar(&repo, "repo", "", "repository (owner/repo)")
	list.Flags().StringVar(&typ, "trigger-type", "", "only workflows with this trigger type (schedule, kici_event, …)")
	show := &cobra.Command{
		Use: "show <id>", Short: "Show one registration (with its lock entry)", Args: cobra.ExactArgs(1),
		Example: "  kici-admin registration show <registration-id>",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/registrations/"+url.PathEscape(args[0]), nil, nil)
			if err != nil {
				return err
			}
			printJSON(a.out(), raw)
			return nil
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}
