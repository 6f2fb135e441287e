// Package cronspec is the one cron parser of kici: the lock-file compiler
// validates a schedule trigger with it, and the scheduler fires what it
// parses, so a schedule that compiles is a schedule that runs.
//
// Accepted (KiCI schedule triggers): standard 5-field expressions
// (minute hour day-of-month month day-of-week) and the descriptors @yearly,
// @monthly, @weekly, @daily, @hourly and @every <duration>. Parsing is by
// github.com/robfig/cron/v3.
package cronspec

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Check reports whether expr is a cron expression kici fires; the error is
// the parser's reason, without the expression (callers name it).
func Check(expr string) error {
	_, err := parser.Parse(expr)
	return err
}

// Parse parses expr in the IANA zone tz ("" = UTC). An @every schedule is
// zone-free (cron.ConstantDelaySchedule); any other is a
// *cron.SpecSchedule whose Location is the zone. Errors name the bad
// expression or zone.
func Parse(expr, tz string) (cron.Schedule, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w", tz, err)
	}
	sched, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %w", expr, err)
	}
	if spec, ok := sched.(*cron.SpecSchedule); ok {
		spec.Location = loc
	}
	return sched, nil
}
