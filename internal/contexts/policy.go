package contexts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/store"
)

// DefaultHoldExpirySeconds bounds a hold when no bound context sets
// HoldExpirySeconds (KiCI's default, 1 hour).
const DefaultHoldExpirySeconds = 3600

// Policy is the most restrictive combination of the bound contexts' hold
// policies (KiCI most-restrictive aggregation). The *Contexts fields name,
// in bound order, the contexts that contributed each aspect.
type Policy struct {
	// TrustFloor is set when any context has MinimumTrust "trusted".
	TrustFloor    bool
	TrustContexts []string
	// Reviewers is the union of the contexts' RequiredReviewers,
	// deduplicated and sorted.
	Reviewers        []string
	ReviewerContexts []string
	// WaitTimerSeconds is the largest positive wait timer (0 = none);
	// TimerContexts are the contexts that set a positive timer.
	WaitTimerSeconds int64
	TimerContexts    []string
	// HoldExpirySeconds is the smallest positive HoldExpirySeconds, or
	// DefaultHoldExpirySeconds when no context sets one; ExpiryContexts are
	// the contexts that set that smallest value (none for the default).
	HoldExpirySeconds int64
	ExpiryContexts    []string
	// ConcurrencyGroups maps each bound context that sets a positive
	// ConcurrencyLimit to that limit: the job needs a slot of every one of
	// these groups (named after their context). KiCI counts a job in one
	// group, named after its first context, with the smallest limit; then
	// a job naming an unlimited context first would escape a limited one.
	// ConcurrencyLimit is the smallest of the limits (0 = none) and
	// ConcurrencyContexts the names, in bound order.
	ConcurrencyGroups   map[string]int64
	ConcurrencyLimit    int64
	ConcurrencyContexts []string
	// ConcurrencyStrategy is the strategy of the first context that sets a
	// limit (store.ConcurrencyQueue when it sets none); ConcurrencyTimeoutMs
	// is the smallest timeout of the contexts that set a limit, or
	// DefaultConcurrencyTimeoutMs.
	ConcurrencyStrategy  string
	ConcurrencyTimeoutMs int64
}

// DefaultConcurrencyTimeoutMs bounds how long a job waits for a
// concurrency slot when no context sets a timeout: 30 minutes (KiCI's
// concurrency_timeout_ms default).
const DefaultConcurrencyTimeoutMs = 1_800_000

// Aggregate folds the bound contexts into their most restrictive Policy:
// a trust floor if any context sets one, the union of reviewers, the
// largest wait timer, the smallest hold expiry (default 3600 s), and a
// concurrency group (with its limit) per context that sets a limit.
// Non-positive timers and expiries count as unset.
func Aggregate(bound []Bound) Policy {
	p := Policy{HoldExpirySeconds: DefaultHoldExpirySeconds}
	var reviewers []string
	var minExpiry int64
	for _, b := range bound {
		c := b.Context
		if c == nil {
			continue
		}
		if c.MinimumTrust != nil && *c.MinimumTrust == store.TrustTrusted {
			p.TrustFloor = true
			p.TrustContexts = append(p.TrustContexts, c.Name)
		}
		if len(c.RequiredReviewers) > 0 {
			reviewers = append(reviewers, c.RequiredReviewers...)
			p.ReviewerContexts = append(p.ReviewerContexts, c.Name)
		}
		if c.WaitTimerSeconds != nil && *c.WaitTimerSeconds > 0 {
			p.TimerContexts = append(p.TimerContexts, c.Name)
			p.WaitTimerSeconds = max(p.WaitTimerSeconds, *c.WaitTimerSeconds)
		}
		if c.ConcurrencyLimit != nil && *c.ConcurrencyLimit > 0 {
			if p.ConcurrencyGroups == nil {
				p.ConcurrencyGroups = map[string]int64{}
			}
			p.ConcurrencyGroups[c.Name] = *c.ConcurrencyLimit
			if p.ConcurrencyStrategy == "" {
				p.ConcurrencyStrategy = c.ConcurrencyStrategy
				if p.ConcurrencyStrategy == "" {
					p.ConcurrencyStrategy = store.ConcurrencyQueue
				}
			}
			if t := c.ConcurrencyTimeoutMs; t != nil && *t > 0 && (p.ConcurrencyTimeoutMs == 0 || *t < p.ConcurrencyTimeoutMs) {
				p.ConcurrencyTimeoutMs = *t
			}
			p.ConcurrencyContexts = append(p.ConcurrencyContexts, c.Name)
			if p.ConcurrencyLimit == 0 || *c.ConcurrencyLimit < p.ConcurrencyLimit {
				p.ConcurrencyLimit = *c.ConcurrencyLimit
			}
		}
		if c.HoldExpirySeconds != nil && *c.HoldExpirySeconds > 0 {
			switch e := *c.HoldExpirySeconds; {
			case minExpiry == 0 || e < minExpiry:
				minExpiry = e
				p.ExpiryContexts = []string{c.Name}
			case e == minExpiry:
				p.ExpiryContexts = append(p.ExpiryContexts, c.Name)
			}
		}
	}
	if p.ConcurrencyLimit > 0 && p.ConcurrencyTimeoutMs == 0 {
		p.ConcurrencyTimeoutMs = DefaultConcurrencyTimeoutMs
	}
	p.Reviewers = sortedUnique(reviewers)
	if minExpiry > 0 {
		p.HoldExpirySeconds = minExpiry
	}
	return p
}

// Done records which holds were already decided for a job, so a job
// re-evaluated after a hold was approved (or a timer released) moves on to
// the next check instead of being held again.
type Done struct {
	TrustApproved     bool
	ReviewersApproved bool
	TimerElapsed      bool
}

// Verdict is the outcome of Evaluate.
type Verdict string

// Verdicts. A wait timer is a Hold of type hold.Timer (KiCI's "wait").
const (
	Pass Verdict = "pass"
	Hold Verdict = "hold"
)

// Decision is what Evaluate decided for a job. For a Pass every other
// field is empty.
type Decision struct {
	Verdict Verdict
	// HoldType is hold.Security, hold.Reviewer or hold.Timer.
	HoldType hold.Type
	// QueueType is hold.QueueSecurity for a trust hold, else
	// hold.QueueContext.
	QueueType hold.Queue
	// Reason is hold.ReasonContextTrust for a trust hold, else a
	// sentence naming the contexts ("context 'release' requires approval
	// from alice, bob").
	Reason hold.Reason
	// Clauses are the approval clauses of a reviewer hold: one
	// {kind:"user", value:reviewer} per reviewer, all required.
	Clauses []store.ApprovalClause
	// Contexts are the names of the contexts that caused the hold, sorted.
	Contexts []string
	// Duration is how long a timer hold waits before it is released.
	Duration time.Duration
	// Expiry is how long an approval (trust or reviewer) hold may stay
	// pending before it expires.
	Expiry time.Duration
}

// ExpiresAt returns when a hold created at now ends: now + Duration for a
// timer hold, now + Expiry otherwise.
func (d Decision) ExpiresAt(now time.Time) time.Time {
	if d.HoldType == hold.Timer {
		return now.Add(d.Duration)
	}
	return now.Add(d.Expiry)
}

// Evaluate decides in one pass, in KiCI's order, whether the job passes or
// is held: the trust gate (a trust floor holds a run of tier unknown — a
// fork — unless already approved; a run with no resolved tier passes),
// then required reviewers (unless already approved), then the wait timer
// (unless already elapsed). The first check that does not pass decides.
// Concurrency limits are not part of this engine.
func Evaluate(p Policy, f RunFacts, done Done) Decision {
	expiry := time.Duration(p.HoldExpirySeconds) * time.Second
	if p.TrustFloor && f.TrustTier == store.TrustUnknown && !done.TrustApproved {
		return Decision{
			Verdict:   Hold,
			HoldType:  hold.Security,
			QueueType: hold.QueueSecurity,
			Reason:    hold.ReasonContextTrust,
			Contexts:  sortedUnique(p.TrustContexts),
			Expiry:    expiry,
		}
	}
	if len(p.Reviewers) > 0 && !done.ReviewersApproved {
		clauses := make([]store.ApprovalClause, len(p.Reviewers))
		for i, r := range p.Reviewers {
			clauses[i] = store.ApprovalClause{Kind: "user", Value: r}
		}
		names := sortedUnique(p.ReviewerContexts)
		return Decision{
			Verdict:   Hold,
			HoldType:  hold.Reviewer,
			QueueType: hold.QueueContext,
			Reason:    hold.Reason(fmt.Sprintf("%s %s approval from %s", contextsPhrase(names), verb(names, "requires", "require"), strings.Join(p.Reviewers, ", "))),
			Clauses:   clauses,
			Contexts:  names,
			Expiry:    expiry,
		}
	}
	if p.WaitTimerSeconds > 0 && !done.TimerElapsed {
		names := sortedUnique(p.TimerContexts)
		return Decision{
			Verdict:   Hold,
			HoldType:  hold.Timer,
			QueueType: hold.QueueContext,
			Reason:    hold.Reason(fmt.Sprintf("%s %s a wait of %d s", contextsPhrase(names), verb(names, "requires", "require"), p.WaitTimerSeconds)),
			Contexts:  names,
			Duration:  time.Duration(p.WaitTimerSeconds) * time.Second,
		}
	}
	return Decision{Verdict: Pass}
}

// contextsPhrase renders "context 'a'" or "contexts 'a', 'b'".
func contextsPhrase(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	if len(q) == 1 {
		return "context " + q[0]
	}
	return "contexts " + strings.Join(q, ", ")
}

func verb(names []string, one, many string) string {
	if len(names) == 1 {
		return one
	}
	return many
}

// GroupKey names a set of concurrency groups as stored on a concurrency
// hold: the group names sorted and joined with ",".
func (p Policy) GroupKey() string {
	return strings.Join(slices.Sorted(maps.Keys(p.ConcurrencyGroups)), ",")
}

// SlotLimits returns ConcurrencyGroups with int limits, as
// store.ContextStore.AcquireContextSlots takes them.
func (p Policy) SlotLimits() map[string]int {
	out := make(map[string]int, len(p.ConcurrencyGroups))
	for g, l := range p.ConcurrencyGroups {
		out[g] = int(l)
	}
	return out
}
