package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
)

// Config is one benchmark run.
type Config struct {
	// Bin holds kici-orchestrator, kici-agent, kici-admin and kici.
	Bin string
	// Quick shrinks every scenario (a smoke run of the harness).
	Quick bool
	// Postgres also runs the database-bound scenarios on a throwaway
	// PostgreSQL (skipped with a note when its binaries are missing).
	Postgres bool
	// IngestOnly measures only the database-bound figures (trigger → step,
	// the webhook burst and deliveries → runs), skipping the agent, log and
	// memory scenarios.
	IngestOnly bool
	// Keep leaves the data directories (orchestrator and agent logs, the
	// databases) in place and names them, for finding where time goes.
	Keep bool
	// Curves also measures the cost curves (curves.go): agents, queued
	// jobs and, on PostgreSQL, nodes.
	Curves bool
	// Out receives the table and progress notes.
	Out io.Writer
}

// sizes are the scenario sizes.
type sizes struct {
	burst, conc, refs, latRuns, agents, trivial, fanLegs, logLines int
}

func (c Config) sizes() sizes {
	if c.Quick {
		return sizes{burst: 200, conc: 16, refs: 16, latRuns: 5, agents: 50, trivial: 24, fanLegs: 16, logLines: 20000}
	}
	return sizes{burst: 2000, conc: 16, refs: 16, latRuns: 20, agents: 500, trivial: 200, fanLegs: 64, logLines: 1000000}
}

// row is one figure of the table.
type row struct{ figure, sqlite, postgres, target string }

// Run runs every scenario and prints the table.
func Run(ctx context.Context, cfg Config) error {
	sz := cfg.sizes()
	root, err := os.MkdirTemp("", "kici-bench")
	if err != nil {
		return err
	}
	if cfg.Keep {
		defer fmt.Fprintf(cfg.Out, "# data directories kept in %s\n", root)
	} else {
		defer os.RemoveAll(root)
	}
	// Agents started as root run steps as an unprivileged step user, who
	// must be able to pass through to the work directories below root and
	// to read the repository it checks out.
	if err := os.Chmod(root, 0o711); err != nil {
		return err
	}
	repoDir, err := dataDir(root, "repo")
	if err != nil {
		return err
	}
	if err := os.Chmod(repoDir, 0o755); err != nil {
		return err
	}
	sha, err := makeRepo(cfg.Bin, repoDir, sz.logLines, sz.fanLegs)
	if err != nil {
		return err
	}
	note := func(f string, a ...any) { fmt.Fprintf(cfg.Out, "# "+f+"\n", a...) }
	rows := map[string]*row{}
	var order []string
	set := func(figure, target, engine, value string) {
		r := rows[figure]
		if r == nil {
			r = &row{figure: figure, target: target, sqlite: "-", postgres: "-"}
			rows[figure] = r
			order = append(order, figure)
		}
		if engine == "postgres" {
			r.postgres = value
		} else {
			r.sqlite = value
		}
	}

	engines := []string{"sqlite"}
	if cfg.Postgres {
		engines = append(engines, "postgres")
	}
	type scenario func(ctx context.Context, cfg Config, sz sizes, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error
	for _, engine := range engines {
		// Each scenario gets an empty database of its own.
		runs := []scenario{ingestScenarios, warmPoolScenario}
		if cfg.Curves {
			cs := cfg.curveSizes()
			runs = append(runs,
				func(ctx context.Context, cfg Config, sz sizes, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error {
					return agentCurve(ctx, cfg, cs.agents, sz.latRuns, root, engine, repo, sha, extra, set, note)
				},
				func(ctx context.Context, cfg Config, sz sizes, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error {
					return queueCurve(ctx, cfg, cs.queued, sz.latRuns, root, engine, repo, sha, extra, set, note)
				})
		}
		for _, run := range runs {
			var extra []string
			if engine == "postgres" {
				url, err := pgtest.NewDatabase(ctx)
				if err != nil {
					note("postgres: not measured: %v", err)
					break
				}
				defer func() { _ = pgtest.Stop() }() // best effort: the throwaway server's data is not needed
				extra = append(extra, "KICI_DATABASE_URL="+url)
			}
			if err := run(ctx, cfg, sz, root, engine, repoDir, sha, extra, set, note); err != nil {
				return fmt.Errorf("%s: %w", engine, err)
			}
		}
	}
	if cfg.Curves && cfg.Postgres {
		newDB := func() (string, error) { return pgtest.NewDatabase(ctx) }
		if err := nodesCurve(ctx, cfg, cfg.curveSizes(), root, repoDir, sha, newDB, set, note); err != nil {
			return fmt.Errorf("nodes curve: %w", err)
		}
	}
	if !cfg.IngestOnly {
		if err := agentScenarios(ctx, cfg, sz, root, repoDir, sha, set, note); err != nil {
			return err
		}
	}

	w := tabwriter.NewWriter(cfg.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "figure\tSQLite\tPostgreSQL\ttarget")
	fmt.Fprintln(w, "------\t------\t----------\t------")
	for _, f := range order {
		r := rows[f]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.figure, r.sqlite, r.postgres, r.target)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if cfg.Curves {
		fmt.Fprintln(cfg.Out, "# agents N: connects/s · orchestrator CPU per connect · RSS (per agent) · idle CPU · trigger → job.dispatch p50/p99")
		fmt.Fprintln(cfg.Out, "# queued N: jobs parked/s · store size (per job) · RSS · trigger → job.dispatch p50/p99")
		fmt.Fprintln(cfg.Out, "# nodes N: trivial runs/s · the orchestrators' CPU per run")
		fmt.Fprintln(cfg.Out, "# growth: per-unit cost at the last level ÷ at the first; under 1.5 reads as linear")
	}
	return nil
}

type setter func(figure, target, engine, value string)

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// ingestScenarios measures the database-bound figures on one engine:
// trigger → step on an empty queue, the webhook burst (accept latency,
// accepted/s, deliveries → runs/s, leaving its jobs parked), then
// trigger → step again with those jobs parked.
func ingestScenarios(ctx context.Context, cfg Config, sz sizes, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error {
	o, src, err := startWithSource(cfg.Bin, root, engine+"-ingest", repo, append(extra, "KICI_MAX_AGENTS=8")...)
	if err != nil {
		return err
	}
	defer o.stop()
	note("%s: trigger → step, empty queue (%d runs)", engine, sz.latRuns)
	empty, err := triggerToStep(ctx, o, src, sha, sz.latRuns+1)
	if err != nil {
		return err
	}
	empty = empty[1:] // the first run warms the agent binary and the repository
	set("trigger → step p50, empty queue", "≤ 40 ms", engine, ms(percentile(empty, 50)))
	set("trigger → step p99, empty queue", "", engine, ms(percentile(empty, 99)))

	note("%s: burst of %d deliveries at concurrency %d over %d refs", engine, sz.burst, sz.conc, sz.refs)
	before, err := o.runsTotal("")
	if err != nil {
		return err
	}
	start := time.Now()
	lat, wall, err := burst(o, src, "park", sha, sz.burst, sz.conc, sz.refs)
	if err != nil {
		return err
	}
	set("webhook accept p50", "", engine, ms(percentile(lat, 50)))
	set("webhook accept p99 (concurrency 16)", "≤ 20 ms", engine, ms(percentile(lat, 99)))
	set("webhooks accepted/s", "", engine, fmt.Sprintf("%.0f/s", float64(sz.burst)/wall.Seconds()))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err = o.waitRuns(wctx, "", before+sz.burst)
	cancel()
	if err != nil {
		return err
	}
	set("deliveries → runs/s", "≥ 300/s", engine, fmt.Sprintf("%.0f/s", float64(sz.burst)/time.Since(start).Seconds()))

	note("%s: trigger → step with %d jobs parked", engine, sz.burst)
	parked, err := triggerToStep(ctx, o, src, sha, sz.latRuns)
	if err != nil {
		return err
	}
	p99e, p99p := percentile(empty, 99), percentile(parked, 99)
	set(fmt.Sprintf("trigger → step p50, %d parked", sz.burst), "", engine, ms(percentile(parked, 50)))
	set(fmt.Sprintf("trigger → step p99, %d parked", sz.burst), "≤ 1.2× empty p99", engine,
		fmt.Sprintf("%s (%.2f×)", ms(p99p), float64(p99p)/float64(max(p99e, 1))))
	return nil
}

// agentScenarios measures memory per agent, throughput on 8 agents against
// the plain-shell floor, fan-out, and the log pipeline, on SQLite.
func agentScenarios(ctx context.Context, cfg Config, sz sizes, root, repo, sha string, set setter, note func(string, ...any)) error {
	o, src, err := startWithSource(cfg.Bin, root, "sqlite-agents", repo, "KICI_MAX_AGENTS=8")
	if err != nil {
		return err
	}
	defer o.stop()
	time.Sleep(time.Second)
	note("memory with %d protocol clients", sz.agents)
	mem, err := agentMemory(ctx, o, sz.agents)
	if err != nil {
		return err
	}
	set("orchestrator RSS idle", "", "sqlite", fmt.Sprintf("%.1f MB", float64(mem.idleKB)/1024))
	set(fmt.Sprintf("RSS per connected agent (%d)", mem.agents), "", "sqlite", fmt.Sprintf("%.0f KB", float64(mem.withKB-mem.idleKB)/float64(mem.agents)))
	set("RSS after they left", "", "sqlite", fmt.Sprintf("%.1f MB", float64(mem.afterKB)/1024))

	note("throughput: %d trivial runs on 8 agents, and the plain-shell floor", sz.trivial)
	if _, err := triggerToStep(ctx, o, src, sha, 1); err != nil { // warm up
		return err
	}
	took, err := trivialRuns(ctx, o, src, sha, sz.trivial)
	if err != nil {
		return err
	}
	floor, err := shellFloor(repo, sha, sz.trivial, 8)
	if err != nil {
		return err
	}
	kici, shell := float64(sz.trivial)/took.Seconds(), float64(sz.trivial)/floor.Seconds()
	set("trivial runs/s on 8 agents", "≥ 1.0× shell", "sqlite", fmt.Sprintf("%.1f/s (%.2f× shell %.1f/s)", kici, kici/shell, shell))
	fan, legs, err := fanOut(ctx, o, src, sha)
	if err != nil {
		return err
	}
	set(fmt.Sprintf("fan-out jobs/s (%d legs, 8 agents)", legs), "", "sqlite", fmt.Sprintf("%.1f/s (%.2f× shell)", float64(legs)/fan.Seconds(), float64(legs)/fan.Seconds()/shell))

	note("log: one step printing %d lines", sz.logLines)
	lr, err := logRun(ctx, o, src, sha, sz.logLines)
	if err != nil {
		return err
	}
	set("log lines stored / printed", "all", "sqlite", fmt.Sprintf("%d / %d (job %s)", lr.stored, lr.printed, lr.status))
	set("log lines/s end to end", "≥ 300,000/s", "sqlite", fmt.Sprintf("%.0f/s", lr.perSecond))
	set("log page cost first → last", "last ≤ 1.5× first", "sqlite",
		fmt.Sprintf("%s → %s (%.1f×)", ms(lr.firstPage), ms(lr.lastPage), float64(lr.lastPage)/float64(max(lr.firstPage, 1))))
	return nil
}
