package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/contexts"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// PolicyFunc returns the effective trust policy of an org (the stored one,
// or kici's defaults).
type PolicyFunc func(ctx context.Context, orgID string) (store.TrustPolicy, error)

// Gate is the dispatch gate (runs.Gate) of every job whose needs are
// met: first the fork-trust gate of its run, then the dispatch-time context
// flow (KiCI): match the job's contexts, hard gates (reject), then trust
// floor, required reviewers and wait timer (hold), and last a slot of the
// contexts' concurrency group (hold until one frees up). KiCI checks
// concurrency before reviewers; kici takes the slot last so that a job
// waiting for a reviewer or a timer never occupies one. A hold is stored
// with the job's move to held in one transaction.
type Gate struct {
	st     store.Store
	policy PolicyFunc
	log    *slog.Logger
	now    func() time.Time
	// waiting is told that a job now waits for the Resumer (see OnWaiting).
	waiting atomic.Pointer[func()]
}

// NewGate returns the gate; policy gives the effective trust policy.
func NewGate(st store.Store, policy PolicyFunc, logger *slog.Logger) *Gate {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{st: st, policy: policy, log: logger, now: func() time.Time { return time.Now().UTC() }}
}

// forkHoldReason is the pending reason shown on the jobs of a fork pull
// request's run while it waits for approval.
func forkHoldReason(runID string) string {
	return "held: fork pull request awaits approval (kici-admin held-run approve " + runID + ", or a comment /kici approve " + runID + ")"
}

// OnWaiting sets f to be called each time Check leaves a job waiting for
// the Resumer: held (a hold to decide, a timer to elapse, a concurrency
// slot to free) or undecided after an error (the tracker retries it at the
// Resumer's next sweep). The orchestrator passes the Resumer's Expect, so
// that the Resumer sweeps often while work waits and rarely when none does.
// f must not block; nil removes it.
func (g *Gate) OnWaiting(f func()) {
	if f == nil {
		g.waiting.Store(nil)
		return
	}
	g.waiting.Store(&f)
}

// Check implements runs.Gate.
func (g *Gate) Check(ctx context.Context, run *store.Run, job *store.Job) (runs.GateResult, error) {
	res, err := g.check(ctx, run, job)
	if f := g.waiting.Load(); f != nil && (err != nil || res.Verdict == runs.GateHeld) {
		(*f)()
	}
	return res, err
}

func (g *Gate) check(ctx context.Context, run *store.Run, job *store.Job) (runs.GateResult, error) {
	names, cfgErr := jobContexts(job)
	if run.TrustTier != store.TrustUnknown && cfgErr == nil && len(names) == 0 {
		// Most jobs: no fork, no contexts — nothing to read.
		return runs.GateResult{Verdict: runs.GatePass}, nil
	}
	holds, err := g.st.ListHeldRuns(ctx, store.HeldRunFilter{RunID: run.ID, Limit: 1000})
	if err != nil {
		return runs.GateResult{}, err
	}
	if run.TrustTier == store.TrustUnknown {
		res, decided, err := g.forkGate(ctx, run, job, holds)
		if err != nil || decided {
			return res, err
		}
	}
	if cfgErr != nil {
		return runs.GateResult{Verdict: runs.GateReject, Message: cfgErr.Error()}, nil
	}
	if len(names) == 0 {
		return runs.GateResult{Verdict: runs.GatePass}, nil
	}
	bound, skipped, err := contexts.Resolve(ctx, g.st, run.OrgID, names)
	if err != nil {
		return runs.GateResult{}, err
	}
	if len(skipped) > 0 {
		g.log.Warn("job names contexts that do not exist; skipped", "runId", run.ID, "jobId", job.ID, "contexts", skipped)
	}
	facts := Facts(run, "")
	if rej := contexts.CheckGates(facts, bound); rej != nil {
		return runs.GateResult{Verdict: runs.GateReject, Message: rej.Message()}, nil
	}
	policy := contexts.Aggregate(bound)
	dec := contexts.Evaluate(policy, facts, doneFor(job.ID, holds))
	now := g.now()
	var h *store.HeldRun
	if dec.Verdict == contexts.Pass {
		if policy.ConcurrencyLimit <= 0 {
			return runs.GateResult{Verdict: runs.GatePass}, nil
		}
		// The concurrency slots are taken last, once approvals and timers
		// passed, so a job waiting for a reviewer never blocks a slot. A
		// job that finds others already waiting for one of its groups
		// queues behind them instead of taking a slot that just freed.
		ok, behind, err := g.takeSlots(ctx, run.OrgID, job.ID, policy, holds, now)
		if err != nil || ok {
			return runs.GateResult{Verdict: runs.GatePass}, err
		}
		reason, err := g.slotReason(ctx, run.OrgID, run.ID, policy, behind)
		if err != nil {
			return runs.GateResult{}, err
		}
		h = &store.HeldRun{
			HoldType: hold.Concurrency, QueueType: hold.QueueContext, Clauses: []store.ApprovalClause{},
			Reason:    hold.Reason(reason),
			Contexts:  policy.ConcurrencyContexts,
			Group:     policy.GroupKey(),
			ExpiresAt: now.Add(time.Duration(policy.ConcurrencyTimeoutMs) * time.Millisecond),
		}
	} else {
		h = &store.HeldRun{HoldType: dec.HoldType, QueueType: dec.QueueType, Reason: dec.Reason,
			Contexts: dec.Contexts, Clauses: dec.Clauses, ExpiresAt: dec.ExpiresAt(now)}
	}
	h.ID, h.OrgID, h.RunID, h.JobID, h.HoldScope = holdID(), run.OrgID, run.ID, job.ID, hold.ScopeJob
	if _, err := g.st.CreateHeldRun(ctx, h, []status.Job{status.JobPending}); err != nil {
		return runs.GateResult{}, fmt.Errorf("hold job %s: %w", job.ID, err)
	}
	if h.HoldType == hold.Concurrency && policy.ConcurrencyStrategy == store.ConcurrencyCancelPending {
		if err := g.supersede(ctx, h, now); err != nil {
			return runs.GateResult{}, err
		}
	}
	g.log.Info("job held", "runId", run.ID, "jobId", job.ID, "heldRunId", h.ID, "holdType", h.HoldType, "reason", h.Reason, "expiresAt", h.ExpiresAt)
	return runs.GateResult{Verdict: runs.GateHeld}, nil
}

// forkGate applies the fork policy to a job of a run from a fork. decided
// is false when the job may go on to its context checks.
func (g *Gate) forkGate(ctx context.Context, run *store.Run, job *store.Job, holds []*store.HeldRun) (runs.GateResult, bool, error) {
	var wf *store.HeldRun
	for _, h := range holds {
		if h.JobID == "" && h.Reason == hold.ReasonForkPR {
			wf = h
		}
	}
	if wf == nil {
		p, err := g.policy(ctx, run.OrgID)
		if err != nil {
			// An unreadable policy holds the run, as in KiCI.
			g.log.Error("trust policy unreadable; holding the fork run", "runId", run.ID, "error", err)
			p = store.TrustPolicy{ForkPolicy: store.ForkHold, ApprovalExpirySeconds: 72 * 3600}
		}
		switch p.ForkPolicy {
		case store.ForkAllow:
			return runs.GateResult{}, false, nil
		case store.ForkIgnore:
			return runs.GateResult{Verdict: runs.GateReject, Message: "fork pull requests are ignored by the trust policy (fork policy \"ignore\")"}, true, nil
		}
		now := g.now()
		wf = &store.HeldRun{
			ID: holdID(), OrgID: run.OrgID, RunID: run.ID, HoldType: hold.Security,
			QueueType: hold.QueueSecurity, HoldScope: hold.ScopeWorkflow, Reason: hold.ReasonForkPR,
			Clauses: []store.ApprovalClause{}, ExpiresAt: now.Add(time.Duration(p.ApprovalExpirySeconds) * time.Second),
		}
		if _, err := g.st.CreateHeldRun(ctx, wf, nil); err != nil {
			return runs.GateResult{}, true, fmt.Errorf("hold fork run %s: %w", run.ID, err)
		}
		g.log.Info("fork pull request run held", "runId", run.ID, "heldRunId", wf.ID, "expiresAt", wf.ExpiresAt)
	}
	switch wf.Status {
	case hold.Approved:
		return runs.GateResult{}, false, nil
	case hold.Pending:
		reason := forkHoldReason(run.ID)
		if _, err := g.st.UpdateJobStatus(ctx, job.ID, []status.Job{status.JobPending}, status.JobHeld, store.JobUpdate{PendingReason: &reason}); err != nil {
			return runs.GateResult{}, true, err
		}
		return runs.GateResult{Verdict: runs.GateHeld}, true, nil
	}
	return runs.GateResult{Verdict: runs.GateReject, Message: endMessage(wf)}, true, nil
}

// doneFor says which of a job's holds were already approved (or elapsed),
// so the re-gating after a decision moves on to the next check.
func doneFor(jobID string, holds []*store.HeldRun) contexts.Done {
	var d contexts.Done
	for _, h := range holds {
		if h.JobID != jobID || (h.Status != hold.Approved && h.Status != hold.Released) {
			continue
		}
		switch h.HoldType {
		case hold.Security:
			d.TrustApproved = true
		case hold.Reviewer:
			d.ReviewersApproved = true
		case hold.Timer:
			d.TimerElapsed = true
		}
	}
	return d
}

// jobContexts returns the context names a job's lock entry declares
// (lockfile.Job's Contexts). It runs for every job released, so it decodes
// that one member, not the whole entry with its steps; malformed JSON or
// a contexts member that is not a list of strings is an error.
func jobContexts(job *store.Job) ([]string, error) {
	if len(job.Config) == 0 {
		return nil, nil
	}
	var lj struct {
		Contexts []string `json:"contexts"`
	}
	if err := json.Unmarshal(job.Config, &lj); err != nil {
		return nil, fmt.Errorf("job config: %w", err)
	}
	return lj.Contexts, nil
}

// Facts returns the gate facts of a run; routingKey selects source
// overrides ("" when not needed).
func Facts(run *store.Run, routingKey string) contexts.RunFacts {
	return contexts.RunFacts{
		OrgID: run.OrgID, Repo: run.RepoIdentifier, RoutingKey: routingKey,
		TriggerType: string(run.TriggerType), TargetBranch: run.TargetBranch, TrustTier: run.TrustTier,
	}
}

// TrySlot is the Resumer's retry of a pending concurrency hold: it
// recomputes the job's concurrency group and limit from its contexts and
// tries to take a slot. true means the job now holds one (or no longer
// needs one) and may be released.
func (g *Gate) TrySlot(ctx context.Context, h *store.HeldRun) (bool, error) {
	job, err := g.st.GetJob(ctx, h.JobID)
	if err != nil {
		return false, err
	}
	names, err := jobContexts(job)
	if err != nil {
		return true, nil // the re-gating rejects it with the reason
	}
	bound, _, err := contexts.Resolve(ctx, g.st, h.OrgID, names)
	if err != nil {
		return false, err
	}
	p := contexts.Aggregate(bound)
	if len(p.ConcurrencyGroups) == 0 {
		return true, nil
	}
	ok, err := g.st.AcquireContextSlots(ctx, h.OrgID, job.ID, p.SlotLimits(), g.now())
	if err != nil || ok {
		return ok, err
	}
	return false, g.refreshSlotReason(ctx, h, job, p)
}

// refreshSlotReason keeps a waiting job's reason true as the slots change
// hands: it names the runs holding them now and the older job's run it
// still queues behind (the resumer retries holds oldest first).
func (g *Gate) refreshSlotReason(ctx context.Context, h *store.HeldRun, job *store.Job, p contexts.Policy) error {
	waiting, err := g.st.ListHeldRuns(ctx, store.HeldRunFilter{OrgID: h.OrgID, HoldType: hold.Concurrency,
		Statuses: []hold.Status{hold.Pending}, Limit: 1000})
	if err != nil {
		return err
	}
	behind := ""
	for _, w := range waiting {
		if w.ID == h.ID {
			break
		}
		for _, grp := range strings.Split(w.Group, ",") {
			if _, ok := p.ConcurrencyGroups[grp]; ok && behind == "" && w.JobID != h.JobID {
				behind = w.RunID
			}
		}
	}
	reason, err := g.slotReason(ctx, h.OrgID, h.RunID, p, behind)
	if err != nil || "held: "+reason == job.PendingReason {
		return err
	}
	reason = "held: " + reason
	_, err = g.st.UpdateJobStatus(ctx, job.ID, []status.Job{status.JobHeld}, status.JobHeld, store.JobUpdate{PendingReason: &reason})
	return err
}

// supersede applies the cancel-pending strategy (KiCI): the newest run's
// job waiting for slots of a set of groups replaces the jobs of older runs
// waiting for the same groups, whose holds are cancelled (the resumer then
// cancels their jobs). Jobs of the same run (matrix legs) do not supersede
// each other: they queue.
func (g *Gate) supersede(ctx context.Context, newest *store.HeldRun, now time.Time) error {
	waiting, err := g.st.ListHeldRuns(ctx, store.HeldRunFilter{OrgID: newest.OrgID, HoldType: hold.Concurrency,
		Group: newest.Group, Statuses: []hold.Status{hold.Pending}, Limit: 1000})
	if err != nil {
		return fmt.Errorf("holds of context groups %s: %w", newest.Group, err)
	}
	note := "superseded by a newer job of run " + newest.RunID + " (context groups " + newest.Group + " cancel pending jobs)"
	for _, h := range waiting {
		if h.ID == newest.ID || h.RunID == newest.RunID {
			continue
		}
		ok, err := g.st.DecideHeldRun(ctx, h.ID, nil, nil, hold.Cancelled, "system", note, now)
		if err != nil {
			return fmt.Errorf("supersede hold %s: %w", h.ID, err)
		}
		if ok {
			g.log.Info("waiting job superseded", "heldRunId", h.ID, "runId", h.RunID, "jobId", h.JobID, "by", newest.RunID)
			if err := g.st.AppendAccessLog(ctx, &store.AccessLogEntry{Action: "held_run.superseded",
				Resource: "held_run:" + h.ID + ":run:" + h.RunID, Detail: note}); err != nil {
				g.log.Error("access log", "error", err)
			}
		}
	}
	return nil
}

// takeSlots takes the job's slots of every concurrency group of p, all or
// none. A job the resumer already gave its slots (a released concurrency
// hold) just confirms them; any other job first checks that no other job
// waits for one of its groups, so that freed slots go to the waiting jobs
// in their order; behind is then the run of the first such job.
func (g *Gate) takeSlots(ctx context.Context, orgID, jobID string, p contexts.Policy, holds []*store.HeldRun, now time.Time) (ok bool, behind string, err error) {
	given := false
	for _, h := range holds {
		given = given || (h.JobID == jobID && h.HoldType == hold.Concurrency && h.Status == hold.Released)
	}
	if !given {
		waiting, err := g.st.ListHeldRuns(ctx, store.HeldRunFilter{OrgID: orgID, HoldType: hold.Concurrency,
			Statuses: []hold.Status{hold.Pending}, Limit: 1000})
		if err != nil {
			return false, "", err
		}
		for _, h := range waiting {
			if h.JobID == jobID {
				continue
			}
			for _, grp := range strings.Split(h.Group, ",") {
				if _, ok := p.ConcurrencyGroups[grp]; ok {
					return false, h.RunID, nil
				}
			}
		}
	}
	ok, err = g.st.AcquireContextSlots(ctx, orgID, jobID, p.SlotLimits(), now)
	return ok, "", err
}

// slotReason is the hold reason of a job of run runID waiting for slots of
// p's groups: each group with the runs holding its slots (the job's own
// run included, e.g. another matrix leg), and the run it queues behind
// when another job waits first. E.g. "waiting for a free slot of context
// group 'deploy' (at most 1 running), held by run r1".
func (g *Gate) slotReason(ctx context.Context, orgID, runID string, p contexts.Policy, behind string) (string, error) {
	names := slices.Sorted(maps.Keys(p.ConcurrencyGroups))
	var held []string
	for _, n := range names {
		runs, err := g.st.ContextSlotRuns(ctx, orgID, n)
		if err != nil {
			return "", fmt.Errorf("holders of context group %s: %w", n, err)
		}
		if len(runs) == 0 {
			continue
		}
		by := "held by run"
		if len(runs) > 1 {
			by = "held by runs"
		}
		if len(names) > 1 {
			by = "'" + n + "' " + by
		}
		held = append(held, by+" "+strings.Join(runs, ", "))
	}
	r := "waiting for a free slot of " + groupsPhrase(p)
	if len(held) > 0 {
		r += ", " + strings.Join(held, "; ")
	}
	if behind != "" && behind != runID {
		r += ", queued behind run " + behind
	}
	return r, nil
}

// groupsPhrase describes a job's concurrency groups for its hold reason,
// e.g. "context group 'deploy' (at most 1 running)".
func groupsPhrase(p contexts.Policy) string {
	names := slices.Sorted(maps.Keys(p.ConcurrencyGroups))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("'%s' (at most %d running)", n, p.ConcurrencyGroups[n])
	}
	if len(parts) == 1 {
		return "context group " + parts[0]
	}
	return "context groups " + strings.Join(parts, " and ")
}

// holdID returns a new held-run id. Holds wait first-come first-served in
// the order (created_at, id), and two holds can share a created_at (the
// same millisecond, a fixed clock): a version 7 UUID (RFC 9562) grows with
// time and, within this process, with each call, so the id breaks the tie
// in creation order where a random one would let a later run jump ahead.
func holdID() string { return uuid.Must(uuid.NewV7()).String() }
