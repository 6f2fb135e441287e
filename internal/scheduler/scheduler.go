// Package scheduler fires the schedule triggers of registered workflows
// (see docs/kici-compatibility.md#triggers): for
// each default-branch registration it takes the workflow's first schedule
// trigger, a five-field cron expression (or a descriptor such as @hourly)
// evaluated in the trigger's IANA timezone (default UTC), and fires each
// due instant once, as an internal "schedule" delivery matched against that
// registration only.
//
// Exactly-once and single-scheduler: only the holder of the "scheduler"
// lease in the shared store fires (every orchestrator runs a Scheduler; the
// others stand by and take over when the lease expires), and the delivery
// id "schedule:<key>:<unix seconds>" is unique, so even two schedulers
// overlapping across a lease handover fire an instant once.
//
// Catch-up, never a silent skip: each fired instant is recorded in the
// store (unique on schedule and instant). A scheduler taking the lease —
// after a graceful stop released it, or after a crashed holder's lease
// expired — starts each schedule after its last recorded fire: the latest
// instant due since then fires once if it is within the catch-up window
// (CatchUpWindow, KICI_SCHEDULE_CATCHUP_WINDOW, default 1 h), and every
// other instant in between is recorded in the event log with status
// missed. The same holds between two ticks of one leader (a stalled
// process). A schedule with no recorded fire catches up at most one window
// back, never before its registration. A cron that can never fire (30
// February) never fires. A paused (disabled) source's schedules do not
// fire, and resuming it fires nothing that fell due meanwhile while the
// same leader ran; a deleted source's registrations, and so its schedules,
// are gone.
package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without a zoneinfo database

	"kici.dev/kici/internal/cronspec"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
)

// Defaults of a Scheduler.
const (
	// DefaultTick is how often the scheduler looks for due instants; short
	// enough that an instant fires within seconds of falling due and that
	// a standby takes a released lease at once.
	DefaultTick = 2 * time.Second
	// DefaultLeaseTTL is the lease lifetime; the holder renews it each tick.
	DefaultLeaseTTL = 30 * time.Second
	// LeaseName is the store lease that elects the single scheduler.
	LeaseName = "scheduler"
	// maxSteps bounds the instants walked in one tick for one schedule.
	maxSteps = 100000
)

// Emitter persists and submits an internal event (ingest.Processor.Emit).
type Emitter func(ctx context.Context, id, orgID string, ie *ingest.InternalEvent) (duplicate bool, err error)

// Scheduler fires schedule triggers. Create it with New; Start runs it.
type Scheduler struct {
	st   store.Store
	emit Emitter
	log  *slog.Logger
	// Holder identifies this scheduler in the lease (default
	// "<hostname>-<pid>-<uuid>").
	Holder string
	// Tick and LeaseTTL default to DefaultTick and DefaultLeaseTTL.
	Tick, LeaseTTL time.Duration
	// Now is the clock (tests); nil = time.Now.
	Now func() time.Time
	// CatchUpWindow bounds the catch-up (DefaultCatchUpWindow when zero;
	// negative: no catch-up, only instants due after taking the lease).
	CatchUpWindow time.Duration
	// NotBefore, when set, is the earliest instant this scheduler
	// considers: instants before it are neither fired nor caught up. A node
	// starting on a restored backup sets it to its start (the restore
	// start), so no instant of the backup's past fires at once.
	NotBefore time.Time

	stop context.CancelFunc // ends the Start loop (Release)
	done chan struct{}      // closed when the Start loop has ended

	mu      sync.Mutex
	cursor  map[string]time.Time // schedule key → last instant considered
	since   time.Time            // when this scheduler (last) took the lease
	leading bool
	warned  map[string]bool
}

// New returns a scheduler over st that fires through emit.
func New(st store.Store, emit Emitter, logger *slog.Logger) *Scheduler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	return &Scheduler{st: st, emit: emit, log: logger, Holder: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8]),
		cursor: map[string]time.Time{}, warned: map[string]bool{}}
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Start runs TickOnce every Tick until ctx is cancelled or Release is
// called.
func (s *Scheduler) Start(ctx context.Context) {
	tick := s.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	ctx, s.stop = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			if err := s.TickOnce(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("scheduler: tick", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Schedule is the parsed first schedule trigger of a registration.
type Schedule struct {
	Cron     string
	Timezone string
	sched    cron.Schedule
}

// Parse parses a cron expression in an IANA timezone ("" = UTC) with the
// one cron parser (cronspec) the lock-file compiler validates with. Errors
// name the bad expression or zone.
func Parse(expr, tz string) (*Schedule, error) {
	sched, err := cronspec.Parse(expr, tz)
	if err != nil {
		return nil, err
	}
	if tz == "" {
		tz = "UTC"
	}
	return &Schedule{Cron: expr, Timezone: tz, sched: sched}, nil
}

// Latest returns the latest instant in (after, until], or the zero time
// when none is due.
func (sc *Schedule) Latest(after, until time.Time) time.Time {
	if every, ok := sc.sched.(cron.ConstantDelaySchedule); ok {
		// @every d: the instants are the multiples of d since the Unix
		// epoch, so they do not drift with the ticks.
		last := until.Truncate(every.Delay)
		if every.Delay <= 0 || !last.After(after) {
			return time.Time{}
		}
		return last.UTC()
	}
	var last time.Time
	t := after
	for i := 0; i < maxSteps; i++ {
		next := sc.sched.Next(t)
		if next.IsZero() || next.After(until) {
			break
		}
		last, t = next, next
	}
	return last.UTC()
}

// firstSchedule returns the workflow's first schedule trigger (KiCI uses
// only the first).
func firstSchedule(raw json.RawMessage) (*lockfile.Trigger, error) {
	var wf lockfile.Workflow
	if err := json.Unmarshal(raw, &wf); err != nil {
		return nil, err
	}
	for i := range wf.Triggers {
		if wf.Triggers[i].Type == "schedule" {
			return &wf.Triggers[i], nil
		}
	}
	return nil, nil
}

// key identifies a schedule across re-registrations and sources: org,
// repository, workflow, expression and zone. One repository registered
// under two sources (a GitHub App and a generic source, say) is one
// schedule: it fires once per instant, through the first enabled source.
func key(g *store.Registration, sc *Schedule) string {
	h := sha256.Sum256([]byte(g.OrgID + "\x00" + g.RepoIdentifier + "\x00" + g.WorkflowName + "\x00" + sc.Cron + "\x00" + sc.Timezone))
	return hex.EncodeToString(h[:12])
}

// TickOnce renews (or tries to take) the lease and, when leading, fires the
// due instants. It reports store errors.
func (s *Scheduler) TickOnce(ctx context.Context) error {
	ttl := s.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	now := s.now()
	ok, err := s.st.AcquireLease(ctx, LeaseName, s.Holder, ttl)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		if s.leading {
			s.log.Info("scheduler: lease lost; standing by", "holder", s.Holder)
		}
		s.leading = false
		return nil
	}
	if !s.leading {
		// Taking over: each schedule starts after its last recorded fire
		// (startFrom), so what fell due meanwhile is caught up or recorded.
		s.leading, s.since, s.cursor = true, now, map[string]time.Time{}
		s.log.Info("scheduler: leading", "holder", s.Holder)
	}
	regs, err := s.st.ListRegistrations(ctx, store.RegistrationFilter{TriggerType: "schedule"})
	if err != nil {
		return fmt.Errorf("registrations: %w", err)
	}
	seen := map[string]bool{}
	enabled := map[string]bool{} // source id → enabled (false when deleted)
	// Registrations of enabled sources first, so a schedule shared by two
	// sources fires through an enabled one, and the paused ones after it
	// only advance their (shared) cursor.
	var on, off []*store.Registration
	for _, g := range regs {
		st, ok := enabled[g.SourceID]
		if !ok {
			src, err := s.st.GetSource(ctx, g.SourceID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				s.log.Error("scheduler: source lookup", "sourceId", g.SourceID, "error", err)
				continue // retried next tick; its cursor does not move
			}
			st = err == nil && src.Enabled
			enabled[g.SourceID] = st
		}
		if st {
			on = append(on, g)
		} else {
			off = append(off, g)
		}
	}
	for _, g := range append(on, off...) {
		t, err := firstSchedule(g.Workflow)
		if err != nil || t == nil {
			continue
		}
		sc, err := Parse(t.CronExpression, t.Timezone)
		if err != nil {
			if w := g.ID + err.Error(); !s.warned[w] {
				s.warned[w] = true
				s.log.Warn("scheduler: schedule ignored", "repo", g.RepoIdentifier, "workflow", g.WorkflowName, "error", err)
			}
			continue
		}
		k := key(g, sc)
		seen[k] = true
		from, ok := s.cursor[k]
		known := ok
		if !ok {
			if from, known, err = s.startFrom(ctx, k, g.CreatedAt, now); err != nil {
				s.log.Error("scheduler: last fire", "repo", g.RepoIdentifier, "workflow", g.WorkflowName, "error", err)
				continue // retried next tick
			}
		}
		// The instant to fire: the latest due, if within the window.
		fireFrom := from
		if w := s.window(); w > 0 && now.Add(-w).After(fireFrom) {
			fireFrom = now.Add(-w)
		}
		due := sc.Latest(fireFrom, now)
		missed, capped := 0, false
		if known {
			missed, capped = sc.Count(from, now)
			if !due.IsZero() {
				missed--
			}
		}
		s.cursor[k] = now
		if due.IsZero() && missed == 0 {
			continue
		}
		if !enabled[g.SourceID] {
			// A paused (or removed) source's schedules do not fire. The
			// cursor still advanced, so resuming the source fires nothing
			// that fell due while it was paused (no backfill).
			continue
		}
		if missed > 0 {
			until := now
			if !due.IsZero() {
				until = due.Add(-time.Nanosecond)
			}
			e := missedEntry(g, sc, k, from, until, missed, capped, s.window())
			if err := s.st.RecordMissed(ctx, e); err != nil {
				s.log.Error("scheduler: record missed", "repo", g.RepoIdentifier, "workflow", g.WorkflowName, "error", err)
			} else {
				s.log.Warn("scheduler: instants missed", "repo", g.RepoIdentifier, "workflow", g.WorkflowName, "detail", e.ErrorMessage)
			}
		}
		if due.IsZero() {
			continue
		}
		ie := &ingest.InternalEvent{Kind: ingest.KindSchedule, CronExpression: sc.Cron, Timezone: sc.Timezone, RegistrationID: g.ID,
			ScheduledAt: due.Format(time.RFC3339), TargetSourceID: g.SourceID, TargetRepo: g.RepoIdentifier, TargetWorkflow: g.WorkflowName}
		id := fmt.Sprintf("%s:%s:%d", ingest.KindSchedule, k, due.Unix())
		dup, err := s.emit(ctx, id, g.OrgID, ie)
		if err != nil {
			delete(s.cursor, k) // retried next tick
			s.log.Error("scheduler: fire", "repo", g.RepoIdentifier, "workflow", g.WorkflowName, "at", due, "error", err)
			continue
		}
		if _, err := s.st.RecordScheduleFire(ctx, k, due); err != nil {
			s.log.Error("scheduler: record fire", "repo", g.RepoIdentifier, "workflow", g.WorkflowName, "at", due, "error", err)
		}
		if !dup {
			s.log.Info("scheduler: fired", "repo", g.RepoIdentifier, "workflow", g.WorkflowName, "cron", sc.Cron, "tz", sc.Timezone, "at", due, "deliveryId", id)
		}
	}
	for k := range s.cursor {
		if !seen[k] {
			delete(s.cursor, k)
		}
	}
	return nil
}
