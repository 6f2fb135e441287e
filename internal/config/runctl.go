package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RunControl holds the orchestrator settings of run control (cancel,
// timeouts, stale detection, queue timeout; package runctl).
type RunControl struct {
	// QueueTimeout is KICI_QUEUE_TIMEOUT_MS (default 1 h); 0 = never.
	QueueTimeout time.Duration
	// QueueSweepInterval is KICI_QUEUE_SWEEP_INTERVAL_MS (default 60 s).
	QueueSweepInterval time.Duration
	// ScanInterval is KICI_STALE_DETECTOR_SCAN_INTERVAL_MS (default 60 s).
	ScanInterval time.Duration
	// JobHeartbeatInterval is KICI_JOB_HEARTBEAT_INTERVAL_MS (default 60 s).
	JobHeartbeatInterval time.Duration
	// StaleMultiplier is KICI_STALE_DETECTOR_THRESHOLD_MULTIPLIER (default 2).
	StaleMultiplier int
	// DeadlineGrace is KICI_DEADLINE_GRACE_MS (default 60 s).
	DeadlineGrace time.Duration
	// RecoveryWindow is KICI_RECOVERY_WINDOW_MS (default 120 s).
	RecoveryWindow time.Duration
	// UnroutableGrace is KICI_UNROUTABLE_GRACE_MS (default 10 min; KiCI
	// 120 s); 0 = never fail unroutable jobs early.
	UnroutableGrace time.Duration
}

// StaleThreshold is JobHeartbeatInterval × StaleMultiplier.
func (r *RunControl) StaleThreshold() time.Duration {
	return r.JobHeartbeatInterval * time.Duration(r.StaleMultiplier)
}

// LoadRunControl reads the run-control variables from environ
// ("KEY=value" form). Errors (joined) name the variable and the accepted
// range.
func LoadRunControl(environ []string) (*RunControl, error) {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = strings.TrimSpace(v)
	}
	r := &RunControl{
		QueueTimeout:         time.Hour,
		QueueSweepInterval:   time.Minute,
		ScanInterval:         time.Minute,
		JobHeartbeatInterval: time.Minute,
		StaleMultiplier:      2,
		DeadlineGrace:        time.Minute,
		UnroutableGrace:      10 * time.Minute,
		RecoveryWindow:       2 * time.Minute,
	}
	var errs []error
	ms := func(name string, min time.Duration, dst *time.Duration) {
		v := env[name]
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || time.Duration(n)*time.Millisecond < min || n > int64(365*24*time.Hour/time.Millisecond) {
			errs = append(errs, fmt.Errorf("%s=%q: must be an integer number of milliseconds between %d and one year", name, v, min.Milliseconds()))
			return
		}
		*dst = time.Duration(n) * time.Millisecond
	}
	ms("KICI_QUEUE_TIMEOUT_MS", 0, &r.QueueTimeout)
	ms("KICI_UNROUTABLE_GRACE_MS", 0, &r.UnroutableGrace)
	ms("KICI_QUEUE_SWEEP_INTERVAL_MS", 100*time.Millisecond, &r.QueueSweepInterval)
	ms("KICI_STALE_DETECTOR_SCAN_INTERVAL_MS", 100*time.Millisecond, &r.ScanInterval)
	ms("KICI_JOB_HEARTBEAT_INTERVAL_MS", 100*time.Millisecond, &r.JobHeartbeatInterval)
	ms("KICI_DEADLINE_GRACE_MS", 100*time.Millisecond, &r.DeadlineGrace)
	ms("KICI_RECOVERY_WINDOW_MS", 100*time.Millisecond, &r.RecoveryWindow)
	if v := env["KICI_STALE_DETECTOR_THRESHOLD_MULTIPLIER"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			errs = append(errs, fmt.Errorf("KICI_STALE_DETECTOR_THRESHOLD_MULTIPLIER=%q: must be an integer between 1 and 100", v))
		} else {
			r.StaleMultiplier = n
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}
