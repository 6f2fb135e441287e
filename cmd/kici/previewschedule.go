package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"kici.dev/kici/internal/cronspec"

	"kici.dev/kici/internal/lockfile"
)

// ScheduleFire is one schedule trigger's answer for `kici preview schedule
// --at`: whether it fires in the minute of At, and when it fires next after
// that minute (both in the trigger's time zone).
type ScheduleFire struct {
	Workflow string    `json:"workflow"`
	Trigger  int       `json:"trigger"`
	Cron     string    `json:"cron"`
	Timezone string    `json:"timezone"`
	Fires    bool      `json:"fires"`
	Next     time.Time `json:"next"`
}

// previewSchedule evaluates every schedule trigger of lf at the minute of
// at. A workflow runs when one of its schedule triggers fires then.
func previewSchedule(lf *lockfile.LockFile, at time.Time) ([]ScheduleFire, error) {
	minute := at.Truncate(time.Minute)
	var out []ScheduleFire
	for _, wf := range lf.Workflows {
		for i, t := range wf.Triggers {
			if t.Type != "schedule" {
				continue
			}
			tz := t.Timezone
			if tz == "" {
				tz = "UTC"
			}
			// The scheduler's own parser (cronspec): the preview fires
			// exactly when the orchestrator would.
			sched, err := cronspec.Parse(t.CronExpression, tz)
			if err != nil {
				return nil, fmt.Errorf("workflow %s trigger %d: %w", wf.Name, i, err)
			}
			loc, _ := time.LoadLocation(tz) // loaded by cronspec.Parse already
			local := minute.In(loc)
			out = append(out, ScheduleFire{
				Workflow: wf.Name, Trigger: i, Cron: t.CronExpression, Timezone: tz,
				Fires: sched.Next(local.Add(-time.Second)).Equal(local),
				Next:  sched.Next(local),
			})
		}
	}
	return out, nil
}

func printScheduleFires(w io.Writer, at time.Time, fires []ScheduleFire) {
	if len(fires) == 0 {
		fmt.Fprintln(w, "no workflow has a schedule trigger")
		return
	}
	fmt.Fprintf(w, "schedule at %s\n", at.Truncate(time.Minute).Format(time.RFC3339))
	for _, f := range fires {
		mark := "SKIP"
		if f.Fires {
			mark = "RUN "
		}
		fmt.Fprintf(w, "%s %s: trigger %d %q (%s); next after that: %s\n", mark, f.Workflow, f.Trigger, f.Cron, f.Timezone, f.Next.Format(time.RFC3339))
	}
}

// runPreviewSchedule is `kici preview schedule --at <time>`.
func runPreviewSchedule(w io.Writer, ef *eventFlags, args []string, at string, asJSON bool) error {
	if len(args) != 1 || args[0] != "schedule" {
		return fmt.Errorf("--at goes with the event type schedule: kici preview schedule --at <RFC 3339 time>")
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return fmt.Errorf("--at %q: not an RFC 3339 time (e.g. 2026-03-01T03:00:00Z): %v", at, err)
	}
	lf, err := ef.loadFreshLock("")
	if err != nil {
		return err
	}
	fires, err := previewSchedule(lf, t)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"at": t.Truncate(time.Minute), "schedules": fires})
	}
	printScheduleFires(w, t, fires)
	return nil
}
