package bench

import (
	"context"
	"fmt"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
)

// The figures PostgreSQL is judged on against SQLite are taken side by
// side: one orchestrator per engine runs at the same time, trigger → step
// samples alternate between them (paired), and the webhook burst and the
// trivial runs go in halves mirrored around the middle (interleaved), so
// whatever drifts while the benchmark runs falls on both engines alike. Run one engine after the other and the second inherits
// the first's leftovers: on this kind of host the page cache, and an
// ext4 file system that searches past every inode freed in the last
// 30 s when it creates one, so a checkout after a phase that deleted
// hundreds of them is slower whichever store the orchestrator uses.
// Measured that way, the engines' trigger → step rows swapped order
// between runs of one binary.

// side is one engine's orchestrator in a paired scenario.
type side struct {
	engine string
	o      *orch
	src    *source
}

// engineSettings returns the KICI_* settings an orchestrator on engine
// needs: a fresh database of the throwaway PostgreSQL server for
// "postgres" (started on first use), nothing for "sqlite".
func engineSettings(ctx context.Context, engine string) ([]string, error) {
	if engine != "postgres" {
		return nil, nil
	}
	url, err := pgtest.NewDatabase(ctx)
	if err != nil {
		return nil, err
	}
	return []string{"KICI_DATABASE_URL=" + url}, nil
}

// startSides starts one orchestrator with the benchmark repository as a
// source per engine, on data directories <engine>-<name> under root, with
// extra(engine) settings. An engine whose database cannot be had is left
// out with a note, not an error. The caller stops the sides (stopSides).
func startSides(ctx context.Context, cfg Config, root, repo, name string, engines []string, extra func(engine string) ([]string, error), note func(string, ...any)) ([]*side, error) {
	var sides []*side
	for _, engine := range engines {
		settings, err := engineSettings(ctx, engine)
		if err != nil {
			note("%s: not measured: %v", engine, err)
			continue
		}
		more, err := extra(engine)
		if err != nil {
			stopSides(sides)
			return nil, err
		}
		o, src, err := startWithSource(cfg.Bin, root, engine+"-"+name, repo, append(settings, more...)...)
		if err != nil {
			stopSides(sides)
			return nil, fmt.Errorf("%s: %w", engine, err)
		}
		sides = append(sides, &side{engine: engine, o: o, src: src})
	}
	return sides, nil
}

func stopSides(sides []*side) {
	for _, s := range sides {
		s.o.stop()
	}
}

// paired takes n samples on every side, interleaved: round i measures
// each side once, starting from side i mod len(sides), so neither engine
// always goes first. It returns each side's samples in order, by engine.
func paired(sides []*side, n int, sample func(*side) (time.Duration, error)) (map[string][]time.Duration, error) {
	out := map[string][]time.Duration{}
	for i := 0; i < n; i++ {
		for k := range sides {
			s := sides[(i+k)%len(sides)]
			d, err := sample(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.engine, err)
			}
			out[s.engine] = append(out[s.engine], d)
		}
	}
	return out, nil
}

// oneTriggerToStep is one trigger → step sample on the side's lat branch.
func oneTriggerToStep(ctx context.Context, sha string) func(*side) (time.Duration, error) {
	return func(s *side) (time.Duration, error) {
		d, err := triggerToStep(ctx, s.o, s.src, sha, 1)
		if err != nil {
			return 0, err
		}
		return d[0], nil
	}
}
