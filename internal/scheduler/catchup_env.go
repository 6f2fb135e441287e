package scheduler

import (
	"fmt"
	"strings"
	"time"
)

// CatchUpWindowVar bounds the schedule catch-up of a node taking the
// scheduler lease (a Go duration; "off" disables catch-up).
const CatchUpWindowVar = "KICI_SCHEDULE_CATCHUP_WINDOW"

// CatchUpWindowFromEnv reads KICI_SCHEDULE_CATCHUP_WINDOW from environ
// (os.Environ() form): empty = the default
// (1 h), "off" or "0" = no catch-up, else a positive Go duration of at most
// 7 days (e.g. 30m, 6h); -1 means no catch-up. Errors name the variable
// and the accepted forms.
func CatchUpWindowFromEnv(environ []string) (time.Duration, error) {
	raw := ""
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == CatchUpWindowVar {
			raw = strings.TrimSpace(v)
		}
	}
	switch raw {
	case "":
		return DefaultCatchUpWindow, nil
	case "off", "0":
		return -1, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 || d > 7*24*time.Hour {
		return 0, fmt.Errorf("%s=%q: want a duration such as 30m or 6h (at most 168h), or off", CatchUpWindowVar, raw)
	}
	return d, nil
}
