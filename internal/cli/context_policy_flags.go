package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

// contextPolicyFlags are the policy flags shared by `context create` and
// `context set-policy`. Values are strings so that "" (and "null" for
// --minimum-trust) can clear a field.
type contextPolicyFlags struct {
	branches, reviewers, waitTimer, holdExpiry, minimumTrust, enabled, allowLocal string
	triggerTypes, repoPatterns, allowUntrusted                                    string
	concurrencyLimit, concurrencyStrategy, concurrencyTimeout                     string
}

func (f *contextPolicyFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.branches, "branch-restrictions", "", `branch globs as a JSON array, e.g. '["main","release/*"]' ("" clears)`)
	fl.StringVar(&f.reviewers, "required-reviewers", "", `comma-separated reviewers ("" clears: no approval)`)
	fl.StringVar(&f.waitTimer, "wait-timer", "", `wait timer in seconds ("" clears)`)
	fl.StringVar(&f.holdExpiry, "hold-expiry", "", `hold expiry in seconds ("" clears: default 3600)`)
	fl.StringVar(&f.minimumTrust, "minimum-trust", "", `"trusted" or "null"`)
	fl.StringVar(&f.enabled, "enabled", "", "true or false")
	fl.StringVar(&f.allowLocal, "allow-local-execution", "", "true or false")
	fl.StringVar(&f.triggerTypes, "trigger-types", "", `comma-separated trigger types a run must come from, e.g. push,manual ("" clears: any)`)
	fl.StringVar(&f.repoPatterns, "repo-patterns", "", `comma-separated "owner/name" globs the run's repository must match ("" clears: any)`)
	fl.StringVar(&f.allowUntrusted, "allow-untrusted", "", "true lets fork pull requests (trust tier unknown) receive this context's secrets; default false")
	fl.StringVar(&f.concurrencyLimit, "concurrency-limit", "", `at most this many jobs of the context's concurrency group queued or running at once, 1..10000 ("" clears: no limit)`)
	fl.StringVar(&f.concurrencyStrategy, "concurrency-strategy", "", `what a job does when the group is full: queue (wait its turn) or cancel-pending (wait, cancelling the group's jobs already waiting) ("" clears: queue)`)
	fl.StringVar(&f.concurrencyTimeout, "concurrency-timeout", "", `how long a job waits for a slot, a duration of 1s..24h, e.g. 30m ("" clears: default 30m)`)
}

// csvList splits a comma-separated flag value, dropping blanks.
func csvList(v string) []string {
	var l []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			l = append(l, x)
		}
	}
	return l
}

// body returns the JSON policy fields for every flag that was given.
func (f *contextPolicyFlags) body(cmd *cobra.Command) (map[string]any, error) {
	b := map[string]any{}
	ch := cmd.Flags().Changed
	if ch("branch-restrictions") {
		if f.branches == "" {
			b["branchRestrictions"] = nil
		} else {
			var l []string
			if err := json.Unmarshal([]byte(f.branches), &l); err != nil {
				return nil, fmt.Errorf(`--branch-restrictions must be a JSON array of strings, e.g. '["main"]'`)
			}
			b["branchRestrictions"] = l
		}
	}
	if ch("required-reviewers") {
		if strings.TrimSpace(f.reviewers) == "" {
			b["requiredReviewers"] = nil
		} else {
			var l []string
			for _, r := range strings.Split(f.reviewers, ",") {
				if r = strings.TrimSpace(r); r != "" {
					l = append(l, r)
				}
			}
			b["requiredReviewers"] = l
		}
	}
	for _, n := range []struct{ flag, field, v string }{{"wait-timer", "waitTimerSeconds", f.waitTimer}, {"hold-expiry", "holdExpirySeconds", f.holdExpiry}} {
		if !ch(n.flag) {
			continue
		}
		if n.v == "" || n.v == "null" {
			b[n.field] = nil
			continue
		}
		v, err := strconv.ParseInt(n.v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--%s must be a number of seconds or \"\"", n.flag)
		}
		b[n.field] = v
	}
	if ch("concurrency-limit") {
		if f.concurrencyLimit == "" || f.concurrencyLimit == "null" {
			b["concurrencyLimit"] = nil
		} else {
			v, err := strconv.ParseInt(f.concurrencyLimit, 10, 64)
			if err != nil {
				return nil, errors.New(`--concurrency-limit must be a number of jobs or ""`)
			}
			b["concurrencyLimit"] = v
		}
	}
	if ch("concurrency-strategy") {
		switch f.concurrencyStrategy {
		case "", "null":
			b["concurrencyStrategy"] = nil
		case apitypes.ConcurrencyQueue, apitypes.ConcurrencyCancelPending:
			b["concurrencyStrategy"] = f.concurrencyStrategy
		default:
			return nil, fmt.Errorf(`--concurrency-strategy must be %s, %s or ""`, apitypes.ConcurrencyQueue, apitypes.ConcurrencyCancelPending)
		}
	}
	if ch("concurrency-timeout") {
		if f.concurrencyTimeout == "" || f.concurrencyTimeout == "null" {
			b["concurrencyTimeoutMs"] = nil
		} else {
			// The API takes milliseconds; its range check (1s..24h) stays
			// the one authority, so only the form is checked here.
			d, err := time.ParseDuration(f.concurrencyTimeout)
			if err != nil || d <= 0 || d%time.Millisecond != 0 {
				return nil, errors.New(`--concurrency-timeout must be a duration such as 30m or 90s, or ""`)
			}
			b["concurrencyTimeoutMs"] = d.Milliseconds()
		}
	}
	if ch("minimum-trust") {
		switch f.minimumTrust {
		case "", "null":
			b["minimumTrust"] = nil
		case "trusted":
			b["minimumTrust"] = "trusted"
		default:
			return nil, errors.New(`--minimum-trust must be "trusted" or "null"`)
		}
	}
	for _, n := range []struct{ flag, field, v string }{{"trigger-types", "triggerTypeFilters", f.triggerTypes}, {"repo-patterns", "repoPatterns", f.repoPatterns}} {
		if !ch(n.flag) {
			continue
		}
		if l := csvList(n.v); l != nil {
			b[n.field] = l
		} else {
			b[n.field] = nil
		}
	}
	for _, n := range []struct{ flag, field, v string }{{"enabled", "enabled", f.enabled}, {"allow-local-execution", "allowLocalExecution", f.allowLocal},
		{"allow-untrusted", "allowUntrusted", f.allowUntrusted}} {
		if !ch(n.flag) {
			continue
		}
		v, err := strconv.ParseBool(n.v)
		if err != nil {
			return nil, fmt.Errorf("--%s must be true or false", n.flag)
		}
		b[n.field] = v
	}
	return b, nil
}
