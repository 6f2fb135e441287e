// Package forgestatus reports every run back to the forge its code came
// from: one GitHub check run per job for GitHub App sources, one commit
// status per job for GitHub token sources and for Gitea/Forgejo/Gogs and
// GitLab universal-git sources (POST /api/v1/repos/{owner}/{repo}/statuses/
// {sha}, POST /api/v4/projects/{id}/statuses/{sha}).
//
// It reads runs, jobs, steps and holds from the store (the rows are the
// source of truth, so a restarted reporter resumes where it was) and keeps
// an outbox, check_run_tracking: for each job the state to show and what
// the forge last accepted. Delivery is polite and durable:
//   - at most one call per check every Interval (5 s, KiCI's rate for
//     GitHub check runs); intermediate states coalesce,
//     the terminal state is always delivered;
//   - 5xx, 429 and rate limits are retried with backoff, honouring
//     Retry-After and X-RateLimit-Reset; other 4xx are recorded and not
//     retried;
//   - a check run is created once: the create is marked before it is sent
//     and looked up by external_id (the job id) after a crash.
//
// The reporter runs beside the runs, never in their path: a forge outage
// delays only its own reports. Credentials are never logged.
package forgestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// Defaults of Config.
const (
	// DefaultInterval is the least time between two calls for one check.
	DefaultInterval = 5 * time.Second
	// DefaultPoll is how often runs are looked at.
	DefaultPoll = time.Second
	// sweepEvery is how often the TTL sweep runs (hourly, as in KiCI).
	sweepEvery = time.Hour
	// callTimeout bounds one forge call.
	callTimeout = 15 * time.Second
	// leaseName and leaseTTL: one reporter per cluster.
	leaseName = "forgestatus-reporter"
	leaseTTL  = 30 * time.Second
	// failLines is how many lines of a failing step the check shows.
	failLines = 30
)

// LogReader reads stored step logs (logstore.FS): lines from cursor on and
// the cursor after them.
type LogReader interface {
	Read(runID, jobID string, stepIndex int, cursor, limit int) ([]protocol.LogLine, int, error)
}

// Config configures a Reporter.
type Config struct {
	// PublicURL is KICI_PUBLIC_URL: details_url/target_url link
	// PublicURL/ui/runs/{runId}/jobs/{jobId}; "" leaves them out.
	PublicURL string
	// Interval is the least time between two calls for one check
	// (DefaultInterval when 0).
	Interval time.Duration
	// Poll is how often runs are looked at (DefaultPoll when 0).
	Poll time.Duration
	// HTTP is the client for Gitea and GitLab (a 15 s timeout client when nil).
	HTTP *http.Client
	// GitHubClient returns a GitHub source's REST client (shared with the
	// pipeline, so App installation tokens are cached once).
	GitHubClient func(*store.SourceSettings) (*ghapi.Client, error)
	// TTLDays returns checkRunTrackingTtlDays, read live by the sweep
	// (nil or 0 = rows are kept).
	TTLDays func(ctx context.Context) int64
	// Logs reads step logs for the failing step's last lines.
	Logs LogReader
	// Holder names this process for the reporter lease.
	Holder string
	// Logger receives delivery failures (never credentials).
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Reporter turns run state into forge reports. Create it with New; Run
// drives it.
type Reporter struct {
	st   store.Store
	cfg  Config
	log  *slog.Logger
	http *http.Client

	mu        sync.Mutex
	installs  map[string]int64     // repo → GitHub App installation
	sources   map[string]srcInfo   // source id → target
	tails     map[string]*tail     // job/step → log tail
	srcWait   map[string]time.Time // source id → no calls before (its forge is down or limiting)
	since     time.Time            // runs created after this are looked at
	lastSweep time.Time
	wake      chan struct{}
	// life ends when Run returns (endLife), stopping the background
	// forge calls and their retry waits so shutdown does not leak them.
	life    context.Context
	endLife context.CancelFunc
}

type srcInfo struct {
	t  *target
	ok bool
	at time.Time
}

// New returns a reporter over st.
func New(st store.Store, cfg Config) *Reporter {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: callTimeout}
	}
	life, endLife := context.WithCancel(context.Background())
	return &Reporter{st: st, cfg: cfg, log: cfg.Logger, http: hc, installs: map[string]int64{}, sources: map[string]srcInfo{},
		tails: map[string]*tail{}, srcWait: map[string]time.Time{}, since: cfg.Now().Add(-10 * time.Minute), wake: make(chan struct{}, 1),
		life: life, endLife: endLife}
}

func (r *Reporter) now() time.Time { return r.cfg.Now().UTC() }

// Kick asks for a pass soon (e.g. after a job changed); never blocks.
func (r *Reporter) Kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run reports until ctx ends. Only the holder of the reporter lease
// reports, so two orchestrators on one database never post twice.
//
// The lease is renewed once a third of its TTL has passed, not on every
// pass (a pass follows every released job, and each renewal is a store
// write), and a burst of wake-ups within wakeCoalesce makes one pass.
func (r *Reporter) Run(ctx context.Context) {
	defer r.endLife()
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	var renewed time.Time // zero: not holding the lease
	for {
		if renewed.IsZero() || time.Since(renewed) >= leaseTTL/3 {
			ok, err := r.st.AcquireLease(ctx, leaseName, r.cfg.Holder, leaseTTL)
			renewed = time.Time{}
			if err == nil && ok {
				renewed = time.Now()
			} else if err != nil && ctx.Err() == nil {
				r.log.Warn("forge status: lease", "err", err)
			}
		}
		if !renewed.IsZero() {
			r.Tick(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(wakeCoalesce):
			}
		}
	}
}

// wakeCoalesce is how long a Kick waits for the kicks that follow it, so
// a burst of released jobs makes one pass.
const wakeCoalesce = 100 * time.Millisecond

// Tick is one pass: record the state every open job should show, deliver
// what is due, and sweep old rows once an hour.
func (r *Reporter) Tick(ctx context.Context) {
	now := r.now()
	r.observe(ctx)
	r.deliverDue(ctx, now)
	if now.Sub(r.lastSweep) >= sweepEvery {
		r.lastSweep = now
		r.sweep(ctx, now)
	}
}

// sweep removes rows older than checkRunTrackingTtlDays (0 = keep).
func (r *Reporter) sweep(ctx context.Context, now time.Time) {
	if r.cfg.TTLDays == nil {
		return
	}
	days := r.cfg.TTLDays(ctx)
	if days <= 0 {
		return
	}
	n, err := r.st.DeleteCheckRunsBefore(ctx, now.Add(-time.Duration(days)*24*time.Hour))
	if err != nil {
		r.log.Warn("forge status: sweep", "err", err)
	} else if n > 0 {
		r.log.Info("forge status: swept tracking rows", "rows", n, "ttlDays", days)
	}
}

// SweepNow runs the TTL sweep at once (tests and operators).
func (r *Reporter) SweepNow(ctx context.Context) { r.sweep(ctx, r.now()) }

// deliverDue sends every row whose state changed and whose turn has come.
func (r *Reporter) deliverDue(ctx context.Context, now time.Time) {
	rows, err := r.st.ListCheckRuns(ctx, store.CheckRunFilter{DueAt: &now})
	if err != nil {
		r.log.Warn("forge status: list due", "err", err)
		return
	}
	for _, c := range rows {
		if ctx.Err() != nil {
			return
		}
		if c.PostedAt != nil && now.Sub(*c.PostedAt) < r.cfg.Interval {
			continue // coalesced: the latest state goes out when the interval is over
		}
		r.mu.Lock()
		wait := r.srcWait[c.SourceID]
		r.mu.Unlock()
		if now.Before(wait) {
			continue // its forge failed a moment ago: one probe per backoff, not one per check
		}
		t, ok := r.target(ctx, c.SourceID)
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		ext, err := r.deliver(cctx, t, c)
		cancel()
		if err == nil {
			if err := r.st.RecordCheckRunDelivery(ctx, c.JobID, store.CheckRunDelivery{OK: true, Hash: c.DesiredHash, State: c.DesiredState,
				ExternalID: ext, At: r.now()}); err != nil && !errors.Is(err, store.ErrNotFound) {
				r.log.Warn("forge status: record delivery", "jobId", c.JobID, "err", err)
			}
			continue
		}
		v := classify(err, c.Attempts, r.now())
		d := store.CheckRunDelivery{Hash: c.DesiredHash, Err: v.msg, StatusCode: v.status, GaveUp: v.permanent, At: r.now()}
		if !v.permanent {
			d.NextAttemptAt = &v.next
			if v.status == 0 || v.status >= 500 || v.status == http.StatusTooManyRequests || v.status == http.StatusForbidden {
				r.mu.Lock()
				r.srcWait[c.SourceID] = v.next
				r.mu.Unlock()
			}
		}
		if err := r.st.RecordCheckRunDelivery(ctx, c.JobID, d); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.log.Warn("forge status: record failure", "jobId", c.JobID, "err", err)
		}
		r.log.Warn("forge status: delivery failed", "provider", c.Provider, "repo", c.Repo, "check", c.Name,
			"state", c.DesiredState, "status", v.status, "retry", !v.permanent, "err", v.msg)
		r.recordFailure(ctx, c, v)
	}
}

// recordFailure writes a failed delivery to the event log, once per job
// and state (the retries of one state are counted on the tracking row).
func (r *Reporter) recordFailure(ctx context.Context, c *store.CheckRun, v verdict) {
	org := ""
	if src, err := r.st.GetSource(ctx, c.SourceID); err == nil {
		org = src.OrgID
	}
	what := "will retry"
	if v.permanent {
		what = "refused, not retried"
	}
	now := r.now()
	e := &store.EventLogEntry{DeliveryID: "forge-status:" + c.JobID + ":" + c.DesiredHash, OrgID: org, SourceID: c.SourceID,
		Event: "check_run.delivery", Action: c.DesiredState, Source: "internal", Provider: provider.Name(c.Provider), RepoIdentifier: c.Repo,
		Status: store.EventLogFailed, RunIDs: []string{c.RunID},
		ErrorMessage: truncate(fmt.Sprintf("%s %q → %s (%s): %s", c.Provider, c.Name, c.DesiredState, what, v.msg), 1000),
		ReceivedAt:   now, ProcessedAt: &now}
	if err := r.st.RecordCheckRunFailure(ctx, e); err != nil && !errors.Is(err, store.ErrConflict) {
		r.log.Warn("forge status: event log", "jobId", c.JobID, "err", err)
	}
}

// target returns a source's report target, cached for 30 s.
func (r *Reporter) target(ctx context.Context, sourceID string) (*target, bool) {
	r.mu.Lock()
	si, hit := r.sources[sourceID]
	r.mu.Unlock()
	if hit && r.now().Sub(si.at) < 30*time.Second {
		return si.t, si.ok
	}
	si = srcInfo{at: r.now()}
	src, err := r.st.GetSource(ctx, sourceID)
	if err == nil {
		var set *store.SourceSettings
		set, err = r.st.GetSourceSettings(ctx, sourceID)
		if err == nil && r.cfg.GitHubClient != nil {
			si.t, si.ok, err = targetOf(src, set, r.cfg.GitHubClient)
		}
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		r.log.Warn("forge status: source", "sourceId", sourceID, "err", err)
	}
	r.mu.Lock()
	r.sources[sourceID] = si
	r.mu.Unlock()
	return si.t, si.ok
}

// installation returns the App's installation on repo, cached.
func (r *Reporter) installation(ctx context.Context, c *ghapi.Client, repo string) (int64, error) {
	r.mu.Lock()
	id, ok := r.installs[repo]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := c.RepoInstallation(ctx, repo)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.installs[repo] = id
	r.mu.Unlock()
	return id, nil
}
