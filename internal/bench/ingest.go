package bench

import (
	"context"
	"fmt"
	"time"
)

// ingestScenarios measures the database-bound figures on every engine at
// once (paired.go): trigger → step on an empty queue, paired; then the
// webhook burst (accept latency, accepted/s, deliveries → runs/s, leaving
// its jobs parked), each engine's in two halves mirrored around the
// middle so neither bursts beside an orchestrator busier than the other's
// (burstHalves); then trigger → step again with those jobs parked,
// paired.
func ingestScenarios(ctx context.Context, cfg Config, sz sizes, root, repo, sha string, engines []string, set setter, note func(string, ...any)) error {
	sides, err := startSides(ctx, cfg, root, repo, "ingest", engines,
		func(string) ([]string, error) { return []string{"KICI_MAX_AGENTS=8"}, nil }, note)
	if err != nil {
		return err
	}
	defer stopSides(sides)
	note("%s: trigger → step, empty queue (%d runs each, alternating)", engineList(sides), sz.latRuns)
	empty, err := paired(sides, sz.latRuns+1, oneTriggerToStep(ctx, sha))
	if err != nil {
		return err
	}
	for _, s := range sides {
		e := empty[s.engine][1:] // the first run warms the agent binary and the repository
		empty[s.engine] = e
		set("trigger → step p50, empty queue, spawned agent", "≤ 40 ms", s.engine, ms(percentile(e, 50)))
		set("trigger → step p99, empty queue, spawned agent", "", s.engine, ms(percentile(e, 99)))
	}
	if err := burstHalves(ctx, sides, sz, sha, set, note); err != nil {
		return err
	}
	note("%s: trigger → step with %d jobs parked (%d runs each, alternating)", engineList(sides), sz.burst, sz.latRuns)
	parked, err := paired(sides, sz.latRuns, oneTriggerToStep(ctx, sha))
	if err != nil {
		return err
	}
	for _, s := range sides {
		p99e, p99p := percentile(empty[s.engine], 99), percentile(parked[s.engine], 99)
		set(fmt.Sprintf("trigger → step p50, %d parked", sz.burst), "", s.engine, ms(percentile(parked[s.engine], 50)))
		set(fmt.Sprintf("trigger → step p99, %d parked", sz.burst), "≤ 1.2× empty p99", s.engine,
			fmt.Sprintf("%s (%.2f×)", ms(p99p), float64(p99p)/float64(max(p99e, 1))))
	}
	return nil
}

// burstTally is one engine's share of the burst, summed over its halves.
type burstTally struct {
	lat    []time.Duration // every accept's answer time, as the senders saw it
	wall   time.Duration   // the halves' send times
	toRuns time.Duration   // from each half's first webhook to its last run
	before []bucket        // the accept histogram before the first half; nil when unread
}

// burstHalves posts sz.burst deliveries to every side, in halves mirrored
// around the middle (sqlite, postgres, postgres, sqlite; interleaved),
// each half waited for until every delivery became a run, and sets the
// burst's rows. Run one engine's whole burst after the other's, the
// second would accept beside an orchestrator re-driving 2,000 parked jobs
// and the first beside an empty one.
func burstHalves(ctx context.Context, sides []*side, sz sizes, sha string, set setter, note func(string, ...any)) error {
	note("%s: burst of %d deliveries each at concurrency %d over %d refs, in halves (sqlite, postgres, postgres, sqlite)", engineList(sides), sz.burst, sz.conc, sz.refs)
	tallies := map[string]*burstTally{}
	for _, s := range sides {
		t := &burstTally{}
		if b, err := s.o.acceptBuckets(); err == nil {
			t.before = b
		} else {
			note("%s: the orchestrator's accept histogram: %v", s.engine, err)
		}
		tallies[s.engine] = t
	}
	_, _, err := interleaved(sz.burst, sides, func(s *side, k int) (time.Duration, error) {
		t := tallies[s.engine]
		before, err := s.o.runsTotal("")
		if err != nil {
			return 0, err
		}
		start := time.Now()
		lat, wall, err := burst(s.o, s.src, "park", sha, k, sz.conc, sz.refs)
		if err != nil {
			return 0, err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err = s.o.waitRuns(wctx, "", before+k)
		cancel()
		if err != nil {
			return 0, err
		}
		took := time.Since(start)
		t.lat, t.wall, t.toRuns = append(t.lat, lat...), t.wall+wall, t.toRuns+took
		return took, nil
	}, nil)
	if err != nil {
		return err
	}
	for _, s := range sides {
		t := tallies[s.engine]
		set("webhook accept p50", "", s.engine, ms(percentile(t.lat, 50)))
		set("webhook accept p99 (concurrency 16)", "≤ 10 ms", s.engine, ms(percentile(t.lat, 99)))
		set("webhook accept p99, the orchestrator's own time", "", s.engine, ownAcceptP99(s, t.before, note))
		set("webhooks accepted/s", "", s.engine, fmt.Sprintf("%.0f/s", float64(sz.burst)/t.wall.Seconds()))
		set("deliveries → runs/s", "≥ 1,000/s", s.engine, fmt.Sprintf("%.0f/s", float64(sz.burst)/t.toRuns.Seconds()))
	}
	return nil
}

// ownAcceptP99 is the p99 of the accepts the side's orchestrator counted
// since before (its accept-time histogram), with the bucket it lies in,
// or "-" with a note when it cannot be told.
func ownAcceptP99(s *side, before []bucket, note func(string, ...any)) string {
	if before == nil {
		return "-"
	}
	after, err := s.o.acceptBuckets()
	if err == nil {
		var v, lo, hi float64
		if v, lo, hi, err = quantileBetween(before, after, 0.99); err == nil {
			return fmt.Sprintf("%s (bucket %g–%g ms)", ms(seconds(v)), lo*1000, hi*1000)
		}
	}
	note("%s: the orchestrator's accept p99: %v", s.engine, err)
	return "-"
}
