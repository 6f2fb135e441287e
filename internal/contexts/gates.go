package contexts

import (
	"fmt"
	"slices"
	"strings"

	"kici.dev/kici/internal/store"
)

// RunFacts are the facts about a run (and the job being dispatched) that
// the context gates and policies look at.
type RunFacts struct {
	OrgID string
	// Repo is the run's repository as "owner/name" ("" when unknown: a
	// repository pattern then fails).
	Repo string
	// RoutingKey names the run's source; source overrides are selected by
	// it.
	RoutingKey string
	// TriggerType is how the run was triggered (push, pull_request,
	// manual, …).
	TriggerType string
	// TargetBranch is the branch the run targets; "" (an internally
	// triggered run) always fails a branch restriction.
	TargetBranch string
	// TrustTier is store.TrustTrusted, store.TrustUnknown or "" (no tier
	// resolved: the trust floor does not hold such a run).
	TrustTier string
}

// GateReason is why a context's hard gate rejected a job: one of the
// Reason* codes (KiCI's multi-context gate reasons, see
// docs/kici-compatibility.md#contexts-and-secrets).
type GateReason string

// Gate rejection reasons (KiCI multi-context gate reasons).
const (
	// ReasonContextDisabled: the context is disabled.
	ReasonContextDisabled GateReason = "context_disabled"
	// ReasonBranchRestricted: the run's target branch matches none of the
	// context's branch restrictions.
	ReasonBranchRestricted GateReason = "branch_restricted"
	// ReasonTriggerFiltered: the run's trigger type is not in the context's
	// trigger type filters.
	ReasonTriggerFiltered GateReason = "trigger_filtered"
	// ReasonRepoUnmatched: the run's repository matches none of the
	// context's repository patterns.
	ReasonRepoUnmatched GateReason = "repo_unmatched"
)

// Rejection is why a hard gate rejected a job: the context that rejected
// it, one of the Reason* codes, and a short human detail naming the
// offending value and what was allowed.
type Rejection struct {
	Context string
	Reason  GateReason
	Detail  string
}

// Message returns KiCI's job error text:
// "multi-context gate: '<ctx>' rejected (<reason>: <detail>)".
func (r *Rejection) Message() string {
	return fmt.Sprintf("multi-context gate: '%s' rejected (%s: %s)", r.Context, r.Reason, r.Detail)
}

// Error returns Message, so a Rejection can travel as an error.
func (r *Rejection) Error() string { return r.Message() }

// CheckGates runs the hard gates of every bound context in order and
// returns the first failure, or nil when every context admits the run. Per
// context, in KiCI's order: disabled → context_disabled; a non-empty
// BranchRestrictions none of whose globs matches TargetBranch (an empty
// TargetBranch never matches) → branch_restricted; a non-empty
// TriggerTypeFilters not containing TriggerType → trigger_filtered; a
// non-empty RepoPatterns none of whose globs matches Repo → repo_unmatched.
// An invalid glob never matches.
func CheckGates(f RunFacts, bound []Bound) *Rejection {
	for _, b := range bound {
		if r := checkContext(f, b.Context); r != nil {
			return r
		}
	}
	return nil
}

func checkContext(f RunFacts, c *store.Context) *Rejection {
	if c == nil {
		return nil
	}
	reject := func(reason GateReason, format string, args ...any) *Rejection {
		return &Rejection{Context: c.Name, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if !c.Enabled {
		return reject(ReasonContextDisabled, "context is disabled")
	}
	if len(c.BranchRestrictions) > 0 && !anyGlob(c.BranchRestrictions, f.TargetBranch) {
		if f.TargetBranch == "" {
			return reject(ReasonBranchRestricted, "no target branch, allowed %s", list(c.BranchRestrictions))
		}
		return reject(ReasonBranchRestricted, "branch %q not in %s", f.TargetBranch, list(c.BranchRestrictions))
	}
	if len(c.TriggerTypeFilters) > 0 && !slices.Contains(c.TriggerTypeFilters, f.TriggerType) {
		return reject(ReasonTriggerFiltered, "trigger type %q not in %s", f.TriggerType, list(c.TriggerTypeFilters))
	}
	if len(c.RepoPatterns) > 0 && !anyGlob(c.RepoPatterns, f.Repo) {
		return reject(ReasonRepoUnmatched, "repo %q not in %s", f.Repo, list(c.RepoPatterns))
	}
	return nil
}

// anyGlob reports whether value is non-empty and matches one of globs.
func anyGlob(globs []string, value string) bool {
	if value == "" {
		return false
	}
	for _, g := range globs {
		if matchGlob(g, value) {
			return true
		}
	}
	return false
}

// list formats an allowed list as "[a b c]".
func list(vals []string) string { return "[" + strings.Join(vals, " ") + "]" }
