package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// DefaultCatchUpWindow bounds the catch-up of a scheduler taking the
// lease (KICI_SCHEDULE_CATCHUP_WINDOW): the latest instant that fell due
// while nobody held the lease fires if it is at most this old.
const DefaultCatchUpWindow = time.Hour

// Count returns the number of instants in (after, until], at most
// maxSteps; capped reports that the walk stopped there.
func (sc *Schedule) Count(after, until time.Time) (n int, capped bool) {
	if !until.After(after) {
		return 0, false
	}
	if every, ok := sc.sched.(cron.ConstantDelaySchedule); ok {
		if every.Delay <= 0 {
			return 0, false
		}
		d := int64(every.Delay)
		c := until.UnixNano()/d - after.UnixNano()/d
		if c > maxSteps {
			return maxSteps, true
		}
		return int(c), false
	}
	t := after
	for n < maxSteps {
		next := sc.sched.Next(t)
		if next.IsZero() || next.After(until) {
			return n, false
		}
		n, t = n+1, next
	}
	return n, true
}

// window is the effective catch-up window (DefaultCatchUpWindow unless set;
// negative disables catch-up).
func (s *Scheduler) window() time.Duration {
	if s.CatchUpWindow == 0 {
		return DefaultCatchUpWindow
	}
	return s.CatchUpWindow
}

// startFrom is where a schedule's walk starts when this leader has no
// cursor for it: after its last recorded fire (so every instant since is
// either fired or recorded missed), else — nothing known — at most the
// catch-up window back and never before the registration; never before
// this leader took over when catch-up is disabled. A recorded fire wins
// over the registration time: every push to the default branch registers
// the workflows again, so a push landing between an instant and the
// takeover would otherwise hide that instant (neither fired nor missed).
func (s *Scheduler) startFrom(ctx context.Context, k string, created, now time.Time) (from time.Time, known bool, err error) {
	from, known, err = s.startFromRecord(ctx, k, created, now)
	// On a restored database the record stops at the backup: instants
	// since then were handled (or not) by the nodes that ran after it, so
	// none of them is caught up here.
	if err == nil && from.Before(s.NotBefore) {
		from = s.NotBefore
	}
	return from, known, err
}

// startFromRecord is startFrom without the NotBefore bound.
func (s *Scheduler) startFromRecord(ctx context.Context, k string, created, now time.Time) (from time.Time, known bool, err error) {
	from = created
	if s.window() < 0 {
		if s.since.After(from) {
			from = s.since
		}
		return from, false, nil
	}
	last, err := s.st.LastScheduleFire(ctx, k)
	if err != nil {
		return time.Time{}, false, err
	}
	if last.IsZero() {
		if ws := now.Add(-s.window()); ws.After(from) {
			from = ws
		}
		return from, false, nil
	}
	return last, true, nil
}

// missedEntry is the event-log record of n instants of a schedule in
// (from, until] that were not fired.
func missedEntry(g *store.Registration, sc *Schedule, k string, from, until time.Time, n int, capped bool, window time.Duration) *store.EventLogEntry {
	count := fmt.Sprint(n)
	if capped {
		count = "more than " + count
	}
	return &store.EventLogEntry{
		DeliveryID: fmt.Sprintf("schedule:%s:missed:%d", k, until.Unix()), OrgID: g.OrgID, SourceID: g.SourceID,
		Event: "schedule", Action: g.WorkflowName, Source: "internal", Provider: provider.Kici, RepoIdentifier: g.RepoIdentifier,
		ErrorMessage: fmt.Sprintf("%s instant(s) of %q (%s) after %s up to %s fell due while no scheduler held the lease and were not fired: only the latest instant within the catch-up window (%s) fires",
			count, sc.Cron, sc.Timezone, from.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), window),
	}
}

// Release stops the scheduler started by Start and drops its lease, so
// another node (or this one restarted) leads at its next tick instead of
// after the lease TTL. It waits for a tick in progress to end.
func (s *Scheduler) Release(ctx context.Context) {
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	s.mu.Lock()
	leading := s.leading
	s.leading = false
	s.mu.Unlock()
	if !leading {
		return
	}
	if err := s.st.ReleaseLease(ctx, LeaseName, s.Holder); err != nil {
		s.log.Warn("scheduler: release lease", "error", err)
		return
	}
	s.log.Info("scheduler: lease released", "holder", s.Holder)
}

// Leading reports whether this scheduler held the lease at its last tick
// (for the leader metric and the cluster view).
func (s *Scheduler) Leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading
}
