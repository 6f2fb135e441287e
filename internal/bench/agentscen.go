package bench

import (
	"context"
	"fmt"
	"time"
)

// agentScenarios measures, on one engine, the orchestrator's memory with
// and after sz.agents protocol clients, trivial runs on 8 spawned agents
// and on 8 static agents against the plain-shell floor (with the static
// agents' idle RSS and trigger → step), fan-out, and the log pipeline.
func agentScenarios(ctx context.Context, cfg Config, sz sizes, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error {
	o, src, err := startWithSource(cfg.Bin, root, engine+"-agents", repo, append(extra, "KICI_MAX_AGENTS=8")...)
	if err != nil {
		return err
	}
	defer o.stop()
	// What an idle node holds once its start-up work (migrations, the
	// first sweeps) is behind it and its timers have run for a while: the
	// pages of the binary that start-up touched are released (package
	// startpages), and what the idle server runs comes back within tens
	// of seconds, so an earlier reading would flatter it.
	time.Sleep(idleSettle)
	note("%s: memory with %d protocol clients", engine, sz.agents)
	mem, err := agentMemory(ctx, o, sz.agents)
	if err != nil {
		return err
	}
	set("orchestrator RSS idle", "≤ 25 MB", engine, fmt.Sprintf("%.1f MB (anonymous %.1f MB)", float64(mem.idleKB)/1024, float64(mem.idleAnonKB)/1024))
	set(fmt.Sprintf("RSS per connected agent (%d)", mem.agents), "", engine, fmt.Sprintf("%.0f KB", float64(mem.withKB-mem.idleKB)/float64(mem.agents)))
	set("RSS after they left", "≤ 1.2× idle", engine, fmt.Sprintf("%.1f MB (%.2f× idle)", float64(mem.afterKB)/1024, float64(mem.afterKB)/float64(max(mem.idleKB, 1))))

	note("%s: throughput: %d trivial runs on 8 spawned agents, and the plain-shell floor", engine, sz.trivial)
	if _, err := triggerToStep(ctx, o, src, sha, 1); err != nil { // warm up
		return err
	}
	took, err := trivialRuns(ctx, o, src, "triv", sha, sz.trivial)
	if err != nil {
		return err
	}
	floor, err := shellFloor(repo, sha, sz.trivial, 8)
	if err != nil {
		return err
	}
	kici, shell := float64(sz.trivial)/took.Seconds(), float64(sz.trivial)/floor.Seconds()
	set("trivial runs/s, 8 spawned agents", "≥ 1.0× shell", engine, fmt.Sprintf("%.1f/s (%.2f× shell %.1f/s)", kici, kici/shell, shell))

	if err := staticScenarios(ctx, cfg, sz, o, src, root, engine, sha, shell, set, note); err != nil {
		return err
	}

	fan, legs, err := fanOut(ctx, o, src, sha)
	if err != nil {
		return err
	}
	set(fmt.Sprintf("fan-out jobs/s (%d legs, 8 spawned agents)", legs), "", engine, fmt.Sprintf("%.1f/s (%.2f× shell)", float64(legs)/fan.Seconds(), float64(legs)/fan.Seconds()/shell))

	return logFigures(ctx, o, src, sha, sz, engine, set, note)
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

// staticScenarios starts 8 static kici-agent processes on o and measures
// their idle RSS, trigger → step on them and trivial runs per second
// against the shell floor measured just before (shellRate runs/s). The
// agents are stopped before it returns, so later jobs go to spawned ones.
func staticScenarios(ctx context.Context, cfg Config, sz sizes, o *orch, src *source, root, engine, sha string, shellRate float64, set setter, note func(string, ...any)) error {
	const n = 8
	note("%s: %d static agents: idle RSS, trigger → step, %d trivial runs", engine, n, sz.trivial)
	fleet, err := startStaticAgents(ctx, cfg.Bin, o, root, engine, n)
	if err != nil {
		return err
	}
	defer fleet.stop()
	// Idle: registered, heartbeating, before any job, for as long as the
	// orchestrator's idle reading waits (idleSettle).
	time.Sleep(idleSettle)
	rss, anon := fleet.medianRSSKB()
	set("agent RSS idle (static)", "≤ 8 MB", engine, fmt.Sprintf("%.1f MB (anonymous %.1f MB)", float64(rss)/1024, float64(anon)/1024))

	lat, err := triggerToStepOn(ctx, o, src, sha, "stat", sz.latRuns+1)
	if err != nil {
		return err
	}
	lat = lat[1:] // the first run warms the mirror
	set("trigger → step p50, static agent", "≤ 40 ms", engine, ms(percentile(lat, 50)))
	set("trigger → step p99, static agent", "", engine, ms(percentile(lat, 99)))

	took, err := trivialRuns(ctx, o, src, "stat", sha, sz.trivial)
	if err != nil {
		return err
	}
	kici := float64(sz.trivial) / took.Seconds()
	set("trivial runs/s, 8 static agents", "≥ 1.5× shell", engine, fmt.Sprintf("%.1f/s (%.2f× shell %.1f/s)", kici, kici/shellRate, shellRate))
	// Between jobs, once the agents' idle trim (5 s after a job) has run:
	// the code that ran the jobs stays mapped.
	time.Sleep(10 * time.Second)
	rss, anon = fleet.medianRSSKB()
	set("agent RSS after its runs (static)", "", engine, fmt.Sprintf("%.1f MB (anonymous %.1f MB)", float64(rss)/1024, float64(anon)/1024))
	return nil
}
