package bench

import (
	"context"
	"fmt"
	"time"
)

// agentScenarios measures the orchestrator's memory with and after
// sz.agents protocol clients, trivial runs on 8 spawned agents and on 8
// static agents against the plain-shell floor (with the static agents'
// idle RSS and trigger → step), fan-out, and the log pipeline, on every
// engine, with one orchestrator per engine up at once (paired.go): the
// idle memory is read on both at the same moment, the rest of the memory
// figures one orchestrator at a time, and the timed ones interleaved.
func agentScenarios(ctx context.Context, cfg Config, sz sizes, root, repo, sha string, engines []string, set setter, note func(string, ...any)) error {
	sides, err := startSides(ctx, cfg, root, repo, "agents", engines,
		func(string) ([]string, error) { return []string{"KICI_MAX_AGENTS=8"}, nil }, note)
	if err != nil {
		return err
	}
	defer stopSides(sides)
	if err := memoryFigures(ctx, sz, sides, set, note); err != nil {
		return err
	}

	note("%s: throughput: %d trivial runs each on 8 spawned agents, and the plain-shell floor, interleaved", engineList(sides), sz.trivial)
	for _, s := range sides {
		if _, err := triggerToStep(ctx, s.o, s.src, sha, 1); err != nil { // warm up
			return fmt.Errorf("%s: %w", s.engine, err)
		}
	}
	took, floor, err := interleaved(sz.trivial, sides,
		func(s *side, n int) (time.Duration, error) { return trivialRuns(ctx, s.o, s.src, "triv", sha, n) },
		func(n int) (time.Duration, error) { return shellFloor(repo, sha, n, 8) })
	if err != nil {
		return err
	}
	shell := float64(sz.trivial) / floor.Seconds()
	for _, s := range sides {
		kici := float64(sz.trivial) / took[s.engine].Seconds()
		set("trivial runs/s, 8 spawned agents", "≥ 1.0× shell", s.engine, fmt.Sprintf("%.1f/s (%.2f× shell %.1f/s)", kici, kici/shell, shell))
	}

	if err := staticScenarios(ctx, cfg, sz, sides, root, repo, sha, set, note); err != nil {
		return err
	}

	for _, s := range sides {
		fan, legs, err := fanOut(ctx, s.o, s.src, sha)
		if err != nil {
			return fmt.Errorf("%s: %w", s.engine, err)
		}
		set(fmt.Sprintf("fan-out jobs/s (%d legs, 8 spawned agents)", legs), "", s.engine, fmt.Sprintf("%.1f/s (%.2f× shell)", float64(legs)/fan.Seconds(), float64(legs)/fan.Seconds()/shell))
	}
	for _, s := range sides {
		if err := logFigures(ctx, s.o, s.src, sha, sz, s.engine, set, note); err != nil {
			return fmt.Errorf("%s: %w", s.engine, err)
		}
	}
	return nil
}

// interleaved times n runs on every side (runOn) and n runs of the
// plain-shell floor (floor, none when nil), in halves mirrored around the
// middle: each side then the floor on the first half, the floor then each
// side in reverse order on the second (sqlite, postgres, floor, floor,
// postgres, sqlite), and returns each side's total time and the floor's. Every
// part creates and deletes a checkout per run, and on an ext4 file system
// creating an inode searches past every inode freed in the last 30 s: run
// one after the other, whichever part ran right after another's deletions
// paid for them. Mirrored, a drift of the host over the phase falls on
// every part alike.
func interleaved(n int, sides []*side, runOn func(*side, int) (time.Duration, error), floor func(int) (time.Duration, error)) (map[string]time.Duration, time.Duration, error) {
	type part struct {
		name string
		run  func(int) (time.Duration, error)
	}
	var parts []part
	for _, s := range sides {
		parts = append(parts, part{s.engine, func(k int) (time.Duration, error) { return runOn(s, k) }})
	}
	if floor != nil {
		parts = append(parts, part{"", floor}) // "": the floor
	}
	totals := map[string]time.Duration{}
	halves := []int{n / 2, n - n/2}
	for h, k := range halves {
		for i := range parts {
			p := parts[i]
			if h == 1 {
				p = parts[len(parts)-1-i]
			}
			if k == 0 {
				continue
			}
			d, err := p.run(k)
			if err != nil {
				if p.name == "" {
					return nil, 0, err
				}
				return nil, 0, fmt.Errorf("%s: %w", p.name, err)
			}
			totals[p.name] += d
		}
	}
	floorTotal := totals[""]
	delete(totals, "")
	return totals, floorTotal, nil
}

// memoryScenario measures only the orchestrator's memory (memoryFigures),
// one orchestrator per engine up at once: Config.MemoryOnly.
func memoryScenario(ctx context.Context, cfg Config, sz sizes, root, repo string, engines []string, set setter, note func(string, ...any)) error {
	sides, err := startSides(ctx, cfg, root, repo, "memory", engines,
		func(string) ([]string, error) { return []string{"KICI_MAX_AGENTS=8"}, nil }, note)
	if err != nil {
		return err
	}
	defer stopSides(sides)
	return memoryFigures(ctx, sz, sides, set, note)
}

// memoryFigures sets the orchestrator's memory rows of every side: idle,
// per connected protocol client (sz.agents of them) and after they left.
func memoryFigures(ctx context.Context, sz sizes, sides []*side, set setter, note func(string, ...any)) error {
	// What an idle node holds once its start-up work (migrations, the
	// first sweeps) is behind it and its timers have run for a while: the
	// pages of the binary that start-up touched are released (package
	// startpages), and what the idle server runs comes back within tens
	// of seconds, so an earlier reading would flatter it.
	time.Sleep(idleSettle)
	idle := map[*side]rssResult{} // read together, before either has agents
	for _, s := range sides {
		var r rssResult
		r.idleKB, r.idleAnonKB = rssParts(s.o.cmd.Process.Pid)
		idle[s] = r
	}
	for _, s := range sides {
		note("%s: memory with %d protocol clients", s.engine, sz.agents)
		mem, err := agentMemory(ctx, s.o, sz.agents, idle[s])
		if err != nil {
			return fmt.Errorf("%s: %w", s.engine, err)
		}
		set("orchestrator RSS idle", "≤ 25 MB", s.engine, fmt.Sprintf("%.1f MB (anonymous %.1f MB)", float64(mem.idleKB)/1024, float64(mem.idleAnonKB)/1024))
		set(fmt.Sprintf("RSS per connected agent (%d)", mem.agents), "", s.engine, fmt.Sprintf("%.0f KB", float64(mem.withKB-mem.idleKB)/float64(mem.agents)))
		set("RSS after they left", "≤ 1.2× idle", s.engine, fmt.Sprintf("%.1f MB (%.2f× idle; anonymous %.1f MB)", float64(mem.afterKB)/1024, float64(mem.afterKB)/float64(max(mem.idleKB, 1)), float64(mem.afterAnonKB)/1024))
	}

	return nil
}

// logScenario measures only the log pipeline (logFigures) on an
// orchestrator of its own: Config.LogsOnly.
func logScenario(ctx context.Context, cfg Config, sz sizes, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error {
	o, src, err := startWithSource(cfg.Bin, root, engine+"-logs", repo, append(extra, "KICI_MAX_AGENTS=8")...)
	if err != nil {
		return err
	}
	defer o.stop()
	return logFigures(ctx, o, src, sha, sz, engine, set, note)
}

// logFigures runs one step printing sz.logLines lines on o and sets the
// log rows: lines stored of printed, lines per second end to end, and the
// cost of the log's first and last page.
func logFigures(ctx context.Context, o *orch, src *source, sha string, sz sizes, engine string, set setter, note func(string, ...any)) error {
	note("%s: log: one step printing %d lines", engine, sz.logLines)
	lr, err := logRun(ctx, o, src, sha, sz.logLines)
	if err != nil {
		return err
	}
	set("log lines stored / printed", "all", engine, fmt.Sprintf("%d / %d (job %s)", lr.stored, lr.printed, lr.status))
	set("log lines/s end to end", "≥ 300,000/s", engine, fmt.Sprintf("%.0f/s", lr.perSecond))
	set("log page cost first → last", "last ≤ 1.5× first", engine,
		fmt.Sprintf("%s → %s (%.1f×)", ms(lr.firstPage), ms(lr.lastPage), float64(lr.lastPage)/float64(max(lr.firstPage, 1))))
	return nil
}

// idleSettle is how long the orchestrator and the static agents are left
// idle before their resident size is read.
const idleSettle = 30 * time.Second

// staticScenarios starts 8 static kici-agent processes on every side and
// measures their idle RSS, trigger → step on them (paired) and trivial
// runs per second against the shell floor, interleaved with them
// (interleaved). The agents are stopped before it returns, so later jobs
// go to spawned ones.
func staticScenarios(ctx context.Context, cfg Config, sz sizes, sides []*side, root, repo, sha string, set setter, note func(string, ...any)) error {
	const n = 8
	note("%s: %d static agents each: idle RSS, trigger → step, %d trivial runs", engineList(sides), n, sz.trivial)
	fleets := map[*side]*staticFleet{}
	defer func() {
		for _, f := range fleets {
			f.stop()
		}
	}()
	for _, s := range sides {
		fleet, err := startStaticAgents(ctx, cfg.Bin, s.o, root, s.engine, n)
		if err != nil {
			return fmt.Errorf("%s: %w", s.engine, err)
		}
		fleets[s] = fleet
	}
	// Idle: registered, heartbeating, before any job, for as long as the
	// orchestrator's idle reading waits (idleSettle).
	time.Sleep(idleSettle)
	for _, s := range sides {
		rss, anon := fleets[s].medianRSSKB()
		set("agent RSS idle (static)", "≤ 8 MB", s.engine, fmt.Sprintf("%.1f MB (anonymous %.1f MB)", float64(rss)/1024, float64(anon)/1024))
	}

	lat, err := paired(sides, sz.latRuns+1, func(s *side) (time.Duration, error) {
		d, err := triggerToStepOn(ctx, s.o, s.src, sha, "stat", 1)
		if err != nil {
			return 0, err
		}
		return d[0], nil
	})
	if err != nil {
		return err
	}
	for _, s := range sides {
		l := lat[s.engine][1:] // the first run warms the mirror
		set("trigger → step p50, static agent", "≤ 40 ms", s.engine, ms(percentile(l, 50)))
		set("trigger → step p99, static agent", "", s.engine, ms(percentile(l, 99)))
	}

	took, floor, err := interleaved(sz.trivial, sides,
		func(s *side, k int) (time.Duration, error) { return trivialRuns(ctx, s.o, s.src, "stat", sha, k) },
		func(k int) (time.Duration, error) { return shellFloor(repo, sha, k, 8) })
	if err != nil {
		return err
	}
	shell := float64(sz.trivial) / floor.Seconds()
	for _, s := range sides {
		kici := float64(sz.trivial) / took[s.engine].Seconds()
		set("trivial runs/s, 8 static agents", "≥ 1.5× shell", s.engine, fmt.Sprintf("%.1f/s (%.2f× shell %.1f/s)", kici, kici/shell, shell))
	}
	// Between jobs, once the agents' idle trim (5 s after a job) has run:
	// the code that ran the jobs stays mapped.
	time.Sleep(10 * time.Second)
	for _, s := range sides {
		rss, anon := fleets[s].medianRSSKB()
		set("agent RSS after its runs (static)", "", s.engine, fmt.Sprintf("%.1f MB (anonymous %.1f MB)", float64(rss)/1024, float64(anon)/1024))
	}
	return nil
}
