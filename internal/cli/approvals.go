package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval/hold"
)

// Held runs (approvals) and the trust policy: `kici-admin held-run` and
// `kici-admin trust-policy` (KiCI's command groups of the same names), over
// the admin API or, with --database-url, directly on the database.

const (
	heldRunsPath     = apitypes.AdminPrefix + "/held-runs"
	trustPolicyPath  = apitypes.AdminPrefix + "/trust-policy"
	trustDirPath     = trustPolicyPath + "/directory"
	heldDecisionPath = heldRunsPath + "/decision"
)

// heldRunsAnswer is the answer of GET /held-runs.
type heldRunsAnswer struct {
	HeldRuns []apitypes.HeldRunView `json:"heldRuns"`
}

// addOrgFlag adds --org with its KiCI alias --customer-id.
func addOrgFlag(c *cobra.Command, org *string, usage string) {
	c.Flags().StringVar(org, "org", "", usage)
	c.Flags().StringVar(org, "customer-id", "", "alias of --org")
}

// listHolds returns the holds of org (of run runID when non-empty);
// all=false keeps the pending ones.
func (a *app) listHolds(cmd *cobra.Command, org, runID string, all bool) ([]apitypes.HeldRunView, []byte, error) {
	q := url.Values{"customerId": {org}}
	if runID != "" {
		q.Set("runId", runID)
	}
	if all {
		q.Set("status", "all")
	}
	var out heldRunsAnswer
	raw, err := a.call(cmd, http.MethodGet, heldRunsPath, q, nil, &out)
	return out.HeldRuns, raw, err
}

// waitingFor names what a pending hold still waits for: its open clauses,
// any approval for a hold without clauses, the clock for a wait timer, a
// free slot for a concurrency hold; "-" once decided.
func waitingFor(h apitypes.HeldRunView) string {
	if h.Status != hold.Pending {
		return "-"
	}
	switch h.HoldType {
	case hold.Timer:
		return "time"
	case hold.Concurrency:
		return "a free slot"
	}
	var open []string
	for _, c := range h.Clauses {
		if c.SatisfiedBy == "" {
			open = append(open, c.Value)
		}
	}
	if len(open) == 0 {
		return "any approval"
	}
	return strings.Join(open, ", ")
}

// holdTarget resolves the argument of approve/reject — a held-run id, or a
// run id with exactly one pending hold — to (org, hold id). Without --org
// the argument must be a run id: its org comes from the run.
func (a *app) holdTarget(cmd *cobra.Command, org, arg string) (string, string, error) {
	var matches []apitypes.HeldRunView
	if org != "" {
		holds, _, err := a.listHolds(cmd, org, "", false)
		if err != nil {
			return "", "", err
		}
		for _, h := range holds {
			if h.ID == arg {
				return org, h.ID, nil
			}
			if h.RunID == arg {
				matches = append(matches, h)
			}
		}
	} else {
		var run struct {
			Run struct {
				OrgID string `json:"orgId"`
			} `json:"run"`
		}
		_, err := a.call(cmd, http.MethodGet, apitypes.AdminPrefix+"/runs/"+url.PathEscape(arg), nil, nil, &run)
		var he *HTTPError
		if errors.As(err, &he) && he.Status == http.StatusNotFound {
			return "", "", fmt.Errorf("%s is not a run id; to name a held run by its id, give --org", arg)
		} else if err != nil {
			return "", "", err
		}
		org = run.Run.OrgID
		if matches, _, err = a.listHolds(cmd, org, arg, false); err != nil {
			return "", "", err
		}
	}
	switch len(matches) {
	case 0:
		return "", "", fmt.Errorf("no pending held run with id %s, and no run %s with a pending hold in org %s", arg, arg, org)
	case 1:
		return org, matches[0].ID, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %s has %d pending holds; pass the id of one:", arg, len(matches))
	for _, h := range matches {
		fmt.Fprintf(&b, "\n  %s  job %s  %s  %s", h.ID, orDash(deref(h.JobName)), h.HoldType, h.Reason)
	}
	return "", "", errors.New(b.String())
}

// heldRunCommand is `kici-admin held-run list|approve|reject`.
func (a *app) heldRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "held-run",
		Aliases: []string{"held-runs"},
		Short:   "List, approve and reject held runs (independent mode)",
		Long: `Held runs wait before dispatch: for an approval (a context's required reviewers or
trust floor, or a pull request from a fork under fork policy "hold"), for a context's
wait timer, or for a free slot of a context's concurrency group. Approved holds resume,
rejected or expired ones cancel their work; timers and slots end by themselves.

Without --as, a decision by a token with ci_trust.admin is an operator override: an
approval satisfies every open clause at once (and may end a wait timer early). With
--as <userId>, the decision is made as that member of the approval directory (see
"kici-admin trust-policy directory-set"), only where the member qualifies: as one of
a reviewer hold's required reviewers (by user id), or with CI trust write or admin on
a security hold. A hold still waiting on other reviewers stays pending.

In platform, hybrid and observed mode the KiCI Platform decides; these commands then
fail with HTTP 409 and point to the dashboard, "kici approve" and "/kici approve".`,
		Example: `  kici-admin held-run list --org acme
  kici-admin held-run approve 6f1c0a52-…                 # a run id with one pending hold
  kici-admin held-run approve <held-run-id> --org acme --as alice --reason "reviewed"
  kici-admin held-run reject <run-id> --reason "unknown contributor"`,
	}
	var org, runID string
	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the pending holds of an org (--all: decided ones too)",
		Example: `  kici-admin held-run list --org acme
  kici-admin held-run list --org acme --run <run-id> --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org); err != nil {
				return err
			}
			holds, raw, err := a.listHolds(cmd, org, runID, all)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			if a.quiet {
				for _, h := range holds {
					fmt.Fprintln(a.out(), h.ID)
				}
				return nil
			}
			// ENDS, not EXPIRES: a timer hold is released (not expired) at
			// that time, an approval hold expires unanswered.
			headers := []string{"ID", "RUN", "JOB", "TYPE", "REASON", "WAITING FOR", "ENDS"}
			if all {
				headers = append(headers, "STATUS", "RESOLVED BY")
			}
			t := newTable(a.out(), headers...)
			for _, h := range holds {
				cols := []string{h.ID, h.RunID, orDash(deref(h.JobName)), string(h.HoldType), string(h.Reason), waitingFor(h), fmtTime(&h.ExpiresAt)}
				if all {
					cols = append(cols, string(h.Status), deref(h.ResolvedBy))
				}
				t.row(cols...)
			}
			t.flush()
			if len(holds) == 0 && !all {
				fmt.Fprintln(a.io.Stderr, "no pending held runs")
			}
			return nil
		},
	}
	addOrgFlag(list, &org, "org id (required)")
	list.Flags().StringVar(&runID, "run", "", "only the holds of this run")
	list.Flags().BoolVar(&all, "all", false, "include approved, rejected, expired and cancelled holds")

	decide := func(word string) *cobra.Command {
		var dOrg, reason, as string
		c := &cobra.Command{
			Use:  word + " <held-run-id | run-id>",
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if word == "reject" && strings.TrimSpace(reason) == "" {
					return errors.New("--reason is required to reject")
				}
				o, id, err := a.holdTarget(cmd, dOrg, args[0])
				if err != nil {
					return err
				}
				body := map[string]string{"customerId": o, "heldRunId": id, "decision": word}
				if reason != "" {
					body["reason"] = reason
				}
				if as != "" {
					body["asUserId"] = as
				}
				var res struct {
					Status    hold.Status `json:"status"`
					Remaining []string    `json:"remainingClauses"`
				}
				if done, err := a.callJSON(cmd, http.MethodPost, heldDecisionPath, nil, body, &res); done || err != nil {
					return err
				}
				switch res.Status {
				case hold.Pending:
					fmt.Fprintf(a.out(), "held run %s: approval recorded; still waiting for %s\n", id, strings.Join(res.Remaining, ", "))
				case hold.Released:
					fmt.Fprintf(a.out(), "held run %s approved: the held work resumes\n", id)
				default:
					fmt.Fprintf(a.out(), "held run %s %s\n", id, res.Status)
				}
				return nil
			},
		}
		addOrgFlag(c, &dOrg, "org id (needed when the argument is a held-run id)")
		if word == "approve" {
			c.Short = "Approve a held run (an operator override unless --as names a directory member)"
			c.Example = `  kici-admin held-run approve <run-id>
  kici-admin held-run approve <held-run-id> --org acme --as alice --reason "looked at the diff"`
			c.Flags().StringVar(&reason, "reason", "", "note recorded with the decision")
		} else {
			c.Short = "Reject a held run: its held work is cancelled"
			c.Example = `  kici-admin held-run reject <run-id> --reason "unknown contributor"`
			c.Flags().StringVar(&reason, "reason", "", "why (required)")
		}
		c.Flags().StringVar(&as, "as", "", "decide as this approval-directory user id instead of as the operator")
		return c
	}
	cmd.AddCommand(list, decide("approve"), decide("reject"))
	a.addDatabaseURLFlag(cmd)
	return cmd
}

// policyAnswer is the answer of the trust-policy routes.
type policyAnswer struct {
	Policy apitypes.TrustPolicyView `json:"policy"`
}

// directoryAnswer is the answer of the directory routes.
type directoryAnswer struct {
	Directory       *apitypes.DirectoryView `json:"directory"`
	PlatformManaged bool                    `json:"platformManaged"`
	Removed         *bool                   `json:"removed"`
}

func (a *app) printPolicy(p apitypes.TrustPolicyView) {
	w := a.out()
	fork := p.ForkPolicy
	if p.EffectiveDefault {
		fork += " (kici's default: no policy stored)"
	}
	fmt.Fprintf(w, "org:               %s\nfork policy:       %s\napproval expiry:   %s (%d s)\n", p.CustomerID, fork,
		fmtDuration(time.Duration(p.ApprovalExpirySeconds)*time.Second), p.ApprovalExpirySeconds)
	fmt.Fprintf(w, "source:            %s\nupdated:           %s\nplatform managed:  %t\n", deref(p.Source), fmtTime(p.UpdatedAt), p.PlatformManaged)
	if p.ForkPolicy == apitypes.ForkIgnore {
		fmt.Fprintln(a.io.Stderr, "warning: fork policy \"ignore\" drops pull requests from forks without a run, a check or any trace on the pull request")
	}
}

// trustPolicyCommand is `kici-admin trust-policy show|set|directory|
// directory-set|directory-remove`.
func (a *app) trustPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust-policy",
		Short: "Show and change an org's fork trust policy and approval directory",
		Long: `The trust policy decides what a pull request from a fork does:
  ignore  the event is dropped: no run, no check on the pull request
  hold    the run is created held until approved (kici's default)
  allow   the run proceeds with reduced privilege (no secrets for untrusted runs)
The approval expiry bounds how long a fork hold waits (default 72h).

The approval directory links provider identities (e.g. a GitHub user id) to user ids
with a CI trust level: members with write or admin may approve security holds,
"--as <userId>" decisions and /kici approve comments are checked against it.

Writes are refused (HTTP 409) in platform, hybrid and observed mode: the KiCI
Platform manages the policy there.`,
		Example: `  kici-admin trust-policy show --org acme
  kici-admin trust-policy set --org acme --fork-policy hold --approval-expiry 24h
  kici-admin trust-policy directory-set --org acme --user alice --provider-username alice-gh --provider-user-id 583231 --ci-trust write
  kici-admin trust-policy directory --org acme`,
	}
	var org string
	show := &cobra.Command{
		Use:     "show",
		Short:   "Show the policy in force (kici's defaults when none is stored)",
		Example: "  kici-admin trust-policy show --org acme --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org); err != nil {
				return err
			}
			var out policyAnswer
			if done, err := a.callJSON(cmd, http.MethodGet, trustPolicyPath, url.Values{"customerId": {org}}, nil, &out); done || err != nil {
				return err
			}
			a.printPolicy(out.Policy)
			return nil
		},
	}
	var forkPolicy string
	var expiry time.Duration
	set := &cobra.Command{
		Use:   "set",
		Short: "Change the fork policy and/or the approval expiry; only the flags given change",
		Example: `  kici-admin trust-policy set --org acme --fork-policy allow
  kici-admin trust-policy set --org acme --approval-expiry 90m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org); err != nil {
				return err
			}
			body := map[string]any{"customerId": org}
			if cmd.Flags().Changed("fork-policy") {
				body["forkPolicy"] = forkPolicy
			}
			if cmd.Flags().Changed("approval-expiry") {
				if expiry%time.Second != 0 || expiry < time.Minute {
					return errors.New("--approval-expiry must be whole seconds and at least 1m, e.g. 72h or 90m")
				}
				body["approvalExpirySeconds"] = int64(expiry / time.Second)
			}
			if len(body) == 1 {
				return errors.New("give --fork-policy and/or --approval-expiry")
			}
			var out policyAnswer
			if done, err := a.callJSON(cmd, http.MethodPatch, trustPolicyPath, nil, body, &out); done || err != nil {
				return err
			}
			a.printPolicy(out.Policy)
			return nil
		},
	}
	set.Flags().StringVar(&forkPolicy, "fork-policy", "", "ignore, hold or allow")
	set.Flags().DurationVar(&expiry, "approval-expiry", 0, "how long a fork hold waits for approval, e.g. 72h")

	dir := &cobra.Command{
		Use:     "directory",
		Short:   "List the approval directory: identity links and CI trust levels",
		Example: "  kici-admin trust-policy directory --org acme",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org); err != nil {
				return err
			}
			var out directoryAnswer
			if done, err := a.callJSON(cmd, http.MethodGet, trustDirPath, url.Values{"customerId": {org}}, nil, &out); done || err != nil {
				return err
			}
			a.printDirectory(out)
			return nil
		},
	}
	var user, provider, username, providerID, ciTrust string
	dirSet := &cobra.Command{
		Use:   "directory-set",
		Short: "Register (or re-register) a member: link a provider identity to a user id with a CI trust level",
		Long: `Register a member of the approval directory. The provider user id is the provider's
immutable numeric id (GitHub: https://api.github.com/users/<login> → "id"); /kici approve
comments are matched by it, never by the username. Re-registering replaces the links of
that user and of that provider user id. CI trust: none, read, write (may approve
security holds), admin.`,
		Example: "  kici-admin trust-policy directory-set --org acme --user alice --provider github --provider-username alice-gh --provider-user-id 583231 --ci-trust write",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "user", user, "provider-username", username, "provider-user-id", providerID, "ci-trust", ciTrust); err != nil {
				return err
			}
			body := map[string]string{"customerId": org, "userId": user, "provider": provider, "providerUsername": username,
				"providerUserId": providerID, "ciTrust": ciTrust}
			var out directoryAnswer
			if done, err := a.callJSON(cmd, http.MethodPatch, trustDirPath, nil, body, &out); done || err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "%s registered (%s %s, ci trust %s)\n", user, provider, username, ciTrust)
			return nil
		},
	}
	dirSet.Flags().StringVar(&user, "user", "", "user id (required); --as and reviewer lists name it")
	dirSet.Flags().StringVar(&user, "user-id", "", "alias of --user")
	dirSet.Flags().StringVar(&provider, "provider", "github", "identity provider: github, gitea, gitlab or bitbucket")
	dirSet.Flags().StringVar(&username, "provider-username", "", "login on the provider (required)")
	dirSet.Flags().StringVar(&providerID, "provider-user-id", "", "immutable numeric user id on the provider, 1-20 digits (required)")
	dirSet.Flags().StringVar(&ciTrust, "ci-trust", "", "none, read, write or admin (required)")

	var rmUser string
	dirRemove := &cobra.Command{
		Use:     "directory-remove",
		Short:   "Remove a member: all of its identity links and its trust level",
		Example: "  kici-admin trust-policy directory-remove --org acme --user alice",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("org", org, "user", rmUser); err != nil {
				return err
			}
			var out directoryAnswer
			q := url.Values{"customerId": {org}, "userId": {rmUser}}
			if done, err := a.callJSON(cmd, http.MethodDelete, trustDirPath, q, nil, &out); done || err != nil {
				return err
			}
			if out.Removed != nil && *out.Removed {
				fmt.Fprintf(a.out(), "%s removed from the approval directory\n", rmUser)
			} else {
				fmt.Fprintf(a.out(), "%s is not a member of the approval directory of %s\n", rmUser, org)
			}
			return nil
		},
	}
	dirRemove.Flags().StringVar(&rmUser, "user", "", "user id (required)")
	dirRemove.Flags().StringVar(&rmUser, "user-id", "", "alias of --user")

	for _, c := range []*cobra.Command{show, set, dir, dirSet, dirRemove} {
		addOrgFlag(c, &org, "org id (required)")
	}
	cmd.AddCommand(show, set, dir, dirSet, dirRemove)
	a.addDatabaseURLFlag(cmd)
	return cmd
}

func (a *app) printDirectory(out directoryAnswer) {
	if out.Directory == nil {
		fmt.Fprintln(a.io.Stderr, "the approval directory is empty")
		return
	}
	t := newTable(a.out(), "USER", "PROVIDER", "USERNAME", "PROVIDER USER ID", "CI TRUST")
	for _, l := range out.Directory.IdentityLinks {
		t.row(l.UserID, l.Provider, l.ProviderUsername, l.ProviderUserID, out.Directory.MemberCITrustLevels[l.UserID])
	}
	t.flush()
}
