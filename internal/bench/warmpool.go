package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// warmPoolConfig is the embedded default's scaler (one bare-metal scaler
// "local", label set [local], 8 agents) with a warm pool of one agent.
const warmPoolConfig = `version: 1
scalers:
  - name: local
    type: bare-metal
    maxAgents: 8
    warmPool: { enabled: true, size: 1 }
    labelSets:
      - labels: [local]
`

// warmPoolScenario measures trigger → step when a warm agent waits for
// the job (docs/scaling.md, warm pools), on every engine at once, paired
// (paired.go): each push is sent 0.2 s after every engine's pool reports
// an idle registered agent after its refill, so the figure is the path
// without an agent's start and registration.
func warmPoolScenario(ctx context.Context, cfg Config, sz sizes, root, repo, sha string, engines []string, set setter, note func(string, ...any)) error {
	sides, err := startSides(ctx, cfg, root, repo, "warm", engines, func(engine string) ([]string, error) {
		conf := filepath.Join(root, engine+"-scalers.yaml")
		if err := os.WriteFile(conf, []byte(warmPoolConfig), 0o600); err != nil {
			return nil, err
		}
		return []string{"KICI_SCALER_CONFIG_PATH=" + conf}, nil
	}, note)
	if err != nil {
		return err
	}
	defer stopSides(sides)
	note("%s: trigger → step on a warm pool agent (%d runs each, alternating)", engineList(sides), sz.latRuns)
	taken := map[*side]int{} // runs each pool's agents took so far
	lat, err := paired(sides, sz.latRuns+1, func(s *side) (time.Duration, error) {
		// Each run takes the warm agent; the pool's refill is the next
		// spawn, and the next push waits for it to be ready. Every
		// engine's pool, not only this one's: the other's refill (its
		// agent's start and registration) must not run during the
		// sample.
		for _, o := range sides {
			if err := o.o.waitWarmAgent(ctx, taken[o]+1); err != nil {
				return 0, fmt.Errorf("%s: %w", o.engine, err)
			}
		}
		// As a push usually finds a pool: idle, not in the instant the
		// previous job's agent exits and the new one finishes starting.
		time.Sleep(200 * time.Millisecond)
		taken[s]++
		return oneTriggerToStep(ctx, sha)(s)
	})
	if err != nil {
		return err
	}
	for _, s := range sides {
		l := lat[s.engine][1:] // the first run warms the binary and the mirror
		set("trigger → step p50, warm pool agent", "≤ 40 ms", s.engine, ms(percentile(l, 50)))
		set("trigger → step p99, warm pool agent", "", s.engine, ms(percentile(l, 99)))
	}
	return nil
}

// waitWarmAgent waits until the orchestrator's warm pool has spawned at
// least spawns agents and reports an idle registered one
// (kici_orch_scaler_warm_pool_spawns_total and _ready on /metrics).
func (o *orch) waitWarmAgent(ctx context.Context, spawns int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ready, _, rerr := o.metric(`kici_orch_scaler_warm_pool_ready{scaler="local"}`)
		spawned, _, serr := o.metric(`kici_orch_scaler_warm_pool_spawns_total{scaler="local"}`)
		if rerr == nil && serr == nil && ready >= 1 && spawned >= float64(spawns) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no warm agent became ready: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
