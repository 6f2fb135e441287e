package cronspec

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// TestCheckAcceptsWhatParseFires: every form the compiler accepts parses,
// and what it refuses the scheduler could not fire either.
func TestCheckAcceptsWhatParseFires(t *testing.T) {
	for _, expr := range []string{"0 3 * * *", "*/5 * * * 1-5", "@hourly", "@daily", "@every 90s"} {
		if err := Check(expr); err != nil {
			t.Errorf("Check(%q) = %v", expr, err)
		}
		if _, err := Parse(expr, "Europe/Berlin"); err != nil {
			t.Errorf("Parse(%q) = %v", expr, err)
		}
	}
	for _, expr := range []string{"", "0 3 * *", "0 0 3 * * *", "61 * * * *", "@fortnightly", "every day"} {
		if err := Check(expr); err == nil {
			t.Errorf("Check(%q) accepted", expr)
		}
		if _, err := Parse(expr, ""); err == nil || !strings.Contains(err.Error(), "cron expression") {
			t.Errorf("Parse(%q) = %v, want a cron expression error", expr, err)
		}
	}
}

// TestParseZone: the zone decides the instant; "" is UTC; a bad zone is
// named in the error.
func TestParseZone(t *testing.T) {
	after := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	berlin, err := Parse("0 3 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := berlin.Next(after).UTC(), time.Date(2026, 1, 10, 2, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Berlin 03:00 = %s, want %s", got, want)
	}
	utc, err := Parse("0 3 * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := utc.Next(after).UTC(), time.Date(2026, 1, 10, 3, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("UTC 03:00 = %s, want %s", got, want)
	}
	if _, err := Parse("0 3 * * *", "Mars/Olympus"); err == nil || !strings.Contains(err.Error(), `timezone "Mars/Olympus"`) {
		t.Errorf("bad zone: %v", err)
	}
	every, err := Parse("@every 5m", "Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := every.(cron.ConstantDelaySchedule); !ok {
		t.Errorf("@every parsed as %T", every)
	}
}
