package notify

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// Store is what the notifier reads and writes: the run listing and the
// notification tables.
type Store interface {
	store.NotificationStore
	// ListRuns finds held runs and a run's predecessor (for "fixed").
	ListRuns(ctx context.Context, f store.RunFilter) ([]*store.Run, int, error)
}

// Defaults of Config.
const (
	DefaultPoll        = time.Second
	DefaultBackoff     = 10 * time.Second
	DefaultMaxBackoff  = time.Hour
	DefaultMaxAttempts = 10
	// lookback is how far back the first pass after a start looks for
	// finished runs (outcomes missed while no node was up).
	lookback = time.Hour
	// claimTTL bounds one node's hold on a row (a node that dies while
	// sending frees it after this).
	claimTTL = 2 * time.Minute
	// observeBatch is how many finished runs one pass reads.
	observeBatch = 500
	// sendTimeout bounds one attempt.
	sendTimeout = 30 * time.Second
)

// Config configures a Notifier. Zero values take the defaults.
type Config struct {
	// PublicURL is KICI_PUBLIC_URL, for the run's link.
	PublicURL string
	// Poll is how often runs and the outbox are looked at.
	Poll time.Duration
	// Backoff is the wait after the first failed attempt, doubled after
	// each further failure up to MaxBackoff; MaxAttempts failed attempts
	// mark the row failed.
	Backoff, MaxBackoff time.Duration
	MaxAttempts         int
	// HTTP sends webhooks (a 30 s timeout client when nil).
	HTTP *http.Client
	// SMTP is the mail relay.
	SMTP SMTPConfig
	// Holder names this node in outbox claims.
	Holder string
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Notifier observes run outcomes and delivers the outbox.
type Notifier struct {
	st    Store
	cfg   Config
	log   *slog.Logger
	send  *sender
	since time.Time
	seen  map[string]time.Time // run id + outcome already enqueued → when
}

// New returns a notifier over st.
func New(st Store, cfg Config) *Notifier {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Holder == "" {
		cfg.Holder = uuid.NewString()
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: sendTimeout}
	}
	return &Notifier{st: st, cfg: cfg, log: cfg.Logger, send: &sender{http: hc, smtp: cfg.SMTP, now: cfg.Now},
		since: cfg.Now().Add(-lookback), seen: map[string]time.Time{}}
}

// Run observes and delivers until ctx ends. Every node may run it: the
// outbox's unique key and claims keep each message to one send.
func (n *Notifier) Run(ctx context.Context) {
	t := time.NewTicker(n.cfg.Poll)
	defer t.Stop()
	for {
		n.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick is one pass: enqueue the outcomes of runs finished or held since
// the last pass, then deliver what is due.
func (n *Notifier) Tick(ctx context.Context) {
	subs, err := n.st.ListNotificationSubscriptions(ctx, "")
	if err != nil {
		n.log.Warn("notify: subscriptions", "err", err)
		return
	}
	enabled := slices.DeleteFunc(subs, func(s *store.NotificationSubscription) bool { return !s.Enabled })
	if len(enabled) > 0 {
		n.observe(ctx, enabled)
	} else {
		n.since = n.cfg.Now().Add(-5 * time.Second)
	}
	n.Deliver(ctx)
}

func (n *Notifier) observe(ctx context.Context, subs []*store.NotificationSubscription) {
	runs, err := n.st.ListRunsCompletedSince(ctx, n.since, observeBatch)
	if err != nil {
		n.log.Warn("notify: finished runs", "err", err)
		return
	}
	var last time.Time
	orgs := map[string]bool{}
	for _, s := range subs {
		orgs[s.OrgID] = true
	}
	for _, r := range runs {
		if r.CompletedAt != nil && r.CompletedAt.After(last) {
			last = *r.CompletedAt
		}
		if !orgs[r.OrgID] {
			continue // no subscription can match: skip the predecessor lookup
		}
		for _, o := range n.outcomesOf(ctx, r) {
			n.enqueue(ctx, subs, r, o)
		}
	}
	switch {
	case len(runs) == observeBatch:
		n.since = last // a full batch: move on without overlap, or it would be read again
	case last.Add(-2 * time.Second).After(n.since):
		// A little overlap: a run committed late with an earlier
		// completion time is still seen (the unique key dedupes).
		n.since = last.Add(-2 * time.Second)
	}
	held, _, err := n.st.ListRuns(ctx, store.RunFilter{Statuses: []status.Run{status.RunHeld}, Limit: 200})
	if err != nil {
		n.log.Warn("notify: held runs", "err", err)
	}
	for _, r := range held {
		if orgs[r.OrgID] {
			n.enqueue(ctx, subs, r, OutcomeHeld)
		}
	}
	for k, at := range n.seen {
		if n.cfg.Now().Sub(at) > 2*lookback {
			delete(n.seen, k)
		}
	}
}

// outcomesOf is what a finished run's subscribers may be told: failed;
// succeeded, plus fixed when the previous finished run of its source,
// workflow and branch failed; nothing for a cancelled run.
func (n *Notifier) outcomesOf(ctx context.Context, r *store.Run) []Outcome {
	switch r.Status {
	case status.RunFailed:
		return []Outcome{OutcomeFailed}
	case status.RunSuccess:
		out := []Outcome{OutcomeSucceeded}
		if n.previousFailed(ctx, r) {
			out = append(out, OutcomeFixed)
		}
		return out
	}
	return nil
}

func (n *Notifier) previousFailed(ctx context.Context, r *store.Run) bool {
	branch := r.TargetBranch
	prev, _, err := n.st.ListRuns(ctx, store.RunFilter{SourceID: r.SourceID, WorkflowName: r.WorkflowName, Branch: branch,
		Statuses: []status.Run{status.RunSuccess, status.RunFailed}, Limit: 20})
	if err != nil {
		n.log.Warn("notify: previous run", "runId", r.ID, "err", err)
		return false
	}
	for _, p := range prev { // newest first
		if p.ID == r.ID || !p.CreatedAt.Before(r.CreatedAt) || p.TargetBranch != branch || p.SourceID != r.SourceID {
			continue
		}
		return p.Status == status.RunFailed
	}
	return false
}

// Matches reports whether sub is told of run's outcome o.
func Matches(sub *store.NotificationSubscription, run *store.Run, o Outcome) bool {
	if !sub.Enabled || sub.OrgID != run.OrgID || !slices.Contains(sub.Outcomes, string(o)) {
		return false
	}
	if sub.SourceID != "" && sub.SourceID != run.SourceID {
		return false
	}
	if sub.WorkflowName != "" && sub.WorkflowName != run.WorkflowName {
		return false
	}
	// A new subscription is not told of what happened before it existed.
	at := run.CreatedAt
	if run.CompletedAt != nil {
		at = *run.CompletedAt
	}
	return !at.Before(sub.CreatedAt)
}

func (n *Notifier) enqueue(ctx context.Context, subs []*store.NotificationSubscription, r *store.Run, o Outcome) {
	key := r.ID + "/" + string(o)
	if _, ok := n.seen[key]; ok {
		return
	}
	body, err := json.Marshal(NewMessage(r, o, n.cfg.PublicURL))
	if err != nil {
		return
	}
	for _, s := range subs {
		if !Matches(s, r, o) {
			continue
		}
		if _, err := n.st.EnqueueNotification(ctx, &store.NotificationDelivery{ID: uuid.NewString(), SubscriptionID: s.ID, OrgID: s.OrgID,
			RunID: r.ID, Outcome: string(o), Channel: s.Channel, Payload: body, Status: DeliveryPending}); err != nil {
			n.log.Warn("notify: enqueue", "runId", r.ID, "subscription", s.ID, "err", err)
			return // seen stays unset: tried again next pass
		}
	}
	n.seen[key] = n.cfg.Now()
}

// TestDelivery is the outbox row of a test message for sub (`kici-admin
// notification test`): a made-up run of sub's workflow.
func TestDelivery(sub *store.NotificationSubscription, publicURL string, now time.Time) *store.NotificationDelivery {
	id := uuid.NewString()
	wf := sub.WorkflowName
	if wf == "" {
		wf = "example"
	}
	run := &store.Run{ID: "test-" + id[:8], OrgID: sub.OrgID, SourceID: sub.SourceID, WorkflowName: wf, Status: status.RunSuccess,
		CreatedAt: now, CompletedAt: &now}
	body, _ := json.Marshal(NewMessage(run, OutcomeTest, publicURL))
	return &store.NotificationDelivery{ID: id, SubscriptionID: sub.ID, OrgID: sub.OrgID, RunID: run.ID, Outcome: string(OutcomeTest),
		Channel: sub.Channel, Payload: body, Status: DeliveryPending}
}

// Deliver sends every due outbox row this node can claim.
func (n *Notifier) Deliver(ctx context.Context) {
	due, err := n.st.ListDueNotifications(ctx, n.cfg.Now(), 100)
	if err != nil {
		n.log.Warn("notify: due", "err", err)
		return
	}
	subs := map[string]*store.NotificationSubscription{}
	for _, d := range due {
		if ctx.Err() != nil {
			return
		}
		now := n.cfg.Now()
		ok, err := n.st.ClaimNotification(ctx, d.ID, n.cfg.Holder, now, now.Add(claimTTL))
		if err != nil || !ok {
			continue // another node has it
		}
		sub, hit := subs[d.SubscriptionID]
		if !hit {
			if sub, err = n.st.GetNotificationSubscription(ctx, d.SubscriptionID); err != nil {
				continue
			}
			subs[d.SubscriptionID] = sub
		}
		sctx, cancel := context.WithTimeout(ctx, sendTimeout)
		err = n.send.send(sctx, sub, d)
		cancel()
		n.record(ctx, d, err)
	}
}

func (n *Notifier) record(ctx context.Context, d *store.NotificationDelivery, err error) {
	a := store.NotificationAttempt{OK: err == nil, At: n.cfg.Now()}
	if err != nil {
		var se *sendError
		if !errors.As(err, &se) {
			se = &sendError{err: err}
		}
		a.Err, a.StatusCode = truncate(se.Error(), 500), se.status
		if se.permanent || d.Attempts+1 >= n.cfg.MaxAttempts {
			a.GaveUp = true
		} else {
			wait := n.cfg.Backoff << min(d.Attempts, 20)
			if wait > n.cfg.MaxBackoff || wait <= 0 {
				wait = n.cfg.MaxBackoff
			}
			next := a.At.Add(wait)
			a.NextAttemptAt = &next
		}
		n.log.Warn("notify: delivery failed", "delivery", d.ID, "channel", d.Channel, "runId", d.RunID, "outcome", d.Outcome,
			"attempt", d.Attempts+1, "retry", !a.GaveUp, "err", a.Err)
	}
	if err := n.st.RecordNotificationAttempt(ctx, d.ID, a); err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("notify: record attempt", "delivery", d.ID, "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
