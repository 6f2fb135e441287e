package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadRunControlDefaultsAndOverrides(t *testing.T) {
	r, err := LoadRunControl(nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.QueueTimeout != time.Hour || r.StaleThreshold() != 2*time.Minute || r.QueueSweepInterval != time.Minute {
		t.Errorf("defaults: %+v", r)
	}
	r, err = LoadRunControl([]string{"KICI_QUEUE_TIMEOUT_MS=0", "KICI_JOB_HEARTBEAT_INTERVAL_MS=500", "KICI_STALE_DETECTOR_THRESHOLD_MULTIPLIER=3"})
	if err != nil {
		t.Fatal(err)
	}
	if r.QueueTimeout != 0 || r.StaleThreshold() != 1500*time.Millisecond {
		t.Errorf("overrides: %+v", r)
	}
	for _, bad := range []string{"KICI_QUEUE_TIMEOUT_MS=-1", "KICI_QUEUE_SWEEP_INTERVAL_MS=5", "KICI_STALE_DETECTOR_THRESHOLD_MULTIPLIER=0", "KICI_DEADLINE_GRACE_MS=x"} {
		if _, err := LoadRunControl([]string{bad}); err == nil || !strings.Contains(err.Error(), strings.Split(bad, "=")[0]) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}
