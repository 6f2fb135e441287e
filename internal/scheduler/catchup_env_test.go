package scheduler

import (
	"strings"
	"testing"
	"time"
)

func TestCatchUpWindowFromEnv(t *testing.T) {
	for raw, want := range map[string]time.Duration{"": DefaultCatchUpWindow, "off": -1, "0": -1, "30m": 30 * time.Minute, " 6h ": 6 * time.Hour, "168h": 168 * time.Hour} {
		env := []string{"PATH=/bin"}
		if raw != "" {
			env = append(env, CatchUpWindowVar+"="+raw)
		}
		got, err := CatchUpWindowFromEnv(env)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"-5m", "169h", "soon", "1"} {
		if _, err := CatchUpWindowFromEnv([]string{CatchUpWindowVar + "=" + raw}); err == nil || !strings.Contains(err.Error(), CatchUpWindowVar) {
			t.Errorf("%q: %v, want an error naming %s", raw, err, CatchUpWindowVar)
		}
	}
}
