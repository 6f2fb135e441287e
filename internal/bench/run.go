package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
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
	// LogsOnly measures only the log pipeline (one step printing a
	// million lines), to compare log changes in a minute or two.
	LogsOnly bool
	// MemoryOnly measures only the orchestrator's memory (idle, with
	// protocol clients connected, after they left), in about two minutes.
	MemoryOnly bool
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
	return sizes{burst: 2000, conc: 16, refs: 16, latRuns: 20, agents: 1000, trivial: 200, fanLegs: 64, logLines: 1000000}
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
	defer func() { _ = pgtest.Stop() }() // best effort: the throwaway server's data is not needed
	if cfg.LogsOnly || cfg.MemoryOnly {
		cfg.Curves = false
	}
	if cfg.MemoryOnly {
		if err := memoryScenario(ctx, cfg, sz, root, repoDir, engines, set, note); err != nil {
			return err
		}
	} else if !cfg.LogsOnly {
		// The latency figures, every engine at once (paired.go).
		if err := ingestScenarios(ctx, cfg, sz, root, repoDir, sha, engines, set, note); err != nil {
			return err
		}
		if err := warmPoolScenario(ctx, cfg, sz, root, repoDir, sha, engines, set, note); err != nil {
			return err
		}
		if !cfg.IngestOnly {
			if err := agentScenarios(ctx, cfg, sz, root, repoDir, sha, engines, set, note); err != nil {
				return err
			}
		}
	}
	type scenario func(ctx context.Context, cfg Config, sz sizes, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error
	for _, engine := range engines {
		// Each scenario gets an empty database of its own.
		var runs []scenario
		if cfg.LogsOnly {
			runs = []scenario{logScenario}
		}
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
			extra, err := engineSettings(ctx, engine)
			if err != nil {
				note("%s: not measured: %v", engine, err)
				break
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
	w := tabwriter.NewWriter(cfg.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "figure\tSQLite\tPostgreSQL\tPostgreSQL cost ÷ SQLite\ttarget")
	fmt.Fprintln(w, "------\t------\t----------\t------------------------\t------")
	for _, f := range order {
		r := rows[f]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.figure, r.sqlite, r.postgres, costRatio(r.sqlite, r.postgres), r.target)
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
	fmt.Fprintln(cfg.Out, "# PostgreSQL cost ÷ SQLite: time or memory over SQLite's, or SQLite's rate over PostgreSQL's (target ≤ 1.5×)")
	return nil
}

type setter func(figure, target, engine, value string)

// seconds converts a Prometheus figure in seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// engineList names the sides' engines for a note ("sqlite and postgres").
func engineList(sides []*side) string {
	var names []string
	for _, s := range sides {
		names = append(names, s.engine)
	}
	return strings.Join(names, " and ")
}

// figureValue reads a single figure's leading number and unit ("22.4 ms",
// "681/s", "35.1 MB (…)"); ok is false for composite rows (the curves'
// "a · b · c") and counts without a unit.
var figureValue = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?) ?(ms|MB|KB|/s)(?:$| )`)

// costRatio is how much more PostgreSQL costs than SQLite on one figure:
// for a time or a size PostgreSQL's over SQLite's, for a rate SQLite's
// over PostgreSQL's, so 1.5× reads the same way on every row. It is ""
// when either side is missing or not a single figure.
func costRatio(sqlite, postgres string) string {
	if strings.Contains(sqlite, " · ") || strings.Contains(postgres, " · ") {
		return ""
	}
	a, b := figureValue.FindStringSubmatch(sqlite), figureValue.FindStringSubmatch(postgres)
	if a == nil || b == nil || a[2] != b[2] {
		return ""
	}
	sv, _ := strconv.ParseFloat(a[1], 64)
	pv, _ := strconv.ParseFloat(b[1], 64)
	if sv <= 0 || pv <= 0 {
		return ""
	}
	if a[2] == "/s" {
		return fmt.Sprintf("%.2f×", sv/pv)
	}
	return fmt.Sprintf("%.2f×", pv/sv)
}
