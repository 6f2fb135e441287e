package bench

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the store size
)

// The cost curves: how the orchestrator's cost grows with connected agents,
// with queued jobs and with nodes. Each level's row gives the per-unit
// cost, so a constant per-unit figure down a curve means linear growth.

// curveSizes are the levels of each curve.
type curveSizes struct {
	agents []int // connected protocol clients
	queued []int // parked jobs
	nodes  []int // orchestrators on one PostgreSQL
	runs   int   // trivial runs per nodes level
}

func (c Config) curveSizes() curveSizes {
	if c.Quick {
		return curveSizes{agents: []int{100, 300}, queued: []int{500, 1000}, nodes: []int{1, 2}, runs: 16}
	}
	return curveSizes{agents: []int{1000, 5000, 10000}, queued: []int{2000, 20000, 100000}, nodes: []int{1, 3}, runs: 120}
}

// parkLegs is the matrix width of the parkfan workflow: one delivery parks
// this many jobs.
const parkLegs = 250

// agentCurve connects protocol clients level by level and, at each level,
// measures the connect rate and the orchestrator's CPU per connect, its
// RSS per agent, and trigger → job.dispatch to one more agent that takes
// jobs.
func agentCurve(ctx context.Context, cfg Config, levels []int, latRuns int, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error {
	raiseFDLimit()
	o, src, err := startWithSource(cfg.Bin, root, engine+"-curve-agents", repo, extra...)
	if err != nil {
		return err
	}
	defer o.stop()
	idleTok, err := o.mintToken("bench-idle")
	if err != nil {
		return err
	}
	workTok, err := o.mintToken("bench-worker")
	if err != nil {
		return err
	}
	wsURL := "ws" + strings.TrimPrefix(o.url, "http") + "/ws"
	w, err := dialWorker(ctx, wsURL, workTok, "bench-worker-0", []string{"bench-worker"})
	if err != nil {
		return err
	}
	defer w.close()
	if _, err := dispatchLatency(ctx, o, src, sha, w, 2); err != nil { // warm up
		return err
	}
	idle := o.rssKB()
	var agents []*protoAgent
	defer func() {
		for _, a := range agents {
			a.ws.CloseNow()
		}
	}()
	var perAgentKB, cpuPerConnect []float64
	for _, n := range levels {
		note("%s: connecting up to %d agents", engine, n)
		cpu0, t0 := cpuOf(o.cmd.Process.Pid), time.Now()
		more, err := connectAgents(ctx, wsURL, idleTok, len(agents), n-len(agents))
		agents = append(agents, more...)
		if err != nil {
			return err
		}
		wall, cpu := time.Since(t0), cpuOf(o.cmd.Process.Pid)-cpu0
		time.Sleep(2 * time.Second)
		rss := o.rssKB()
		cpuIdle0 := cpuOf(o.cmd.Process.Pid)
		time.Sleep(3 * time.Second)
		idleShare := float64(cpuOf(o.cmd.Process.Pid)-cpuIdle0) / float64(3*time.Second)
		lat, err := dispatchLatency(ctx, o, src, sha, w, latRuns)
		if err != nil {
			return err
		}
		perAgentKB = append(perAgentKB, float64(rss-idle)/float64(n))
		cpuPerConnect = append(cpuPerConnect, float64(cpu)/float64(time.Millisecond)/float64(max(len(more), 1)))
		set(fmt.Sprintf("agents %d", n), "", engine,
			fmt.Sprintf("%.0f/s · %.2f ms · %.0f MB (%.0f KB) · %.1f%% · %s/%s",
				float64(len(more))/wall.Seconds(), cpuPerConnect[len(cpuPerConnect)-1],
				float64(rss)/1024, perAgentKB[len(perAgentKB)-1], 100*idleShare,
				ms(percentile(lat, 50)), ms(percentile(lat, 99))))
	}
	set("agents: growth", "linear", engine, growth(levels, map[string][]float64{"RSS per agent": perAgentKB, "CPU per connect": cpuPerConnect}))
	return nil
}

// growth compares per-unit costs at the last level with the first: a
// ratio near 1 (under 1.5) means the total cost grows linearly with the
// level; above, it grows faster, by that factor over the range.
func growth(levels []int, perUnit map[string][]float64) string {
	var parts []string
	worse := false
	for _, name := range slices.Sorted(maps.Keys(perUnit)) {
		v := perUnit[name]
		if len(v) < 2 || v[0] <= 0 {
			continue
		}
		r := v[len(v)-1] / v[0]
		worse = worse || r > 1.5
		parts = append(parts, fmt.Sprintf("%s ×%.2f", name, r))
	}
	verdict := "linear"
	if worse {
		verdict = "worse than linear"
	}
	return fmt.Sprintf("%s from %d to %d: %s", strings.Join(parts, ", "), levels[0], levels[len(levels)-1], verdict)
}

// connectAgents connects n protocol clients, numbered from first, 32 at a
// time.
func connectAgents(ctx context.Context, wsURL, token string, first, n int) ([]*protoAgent, error) {
	out := make([]*protoAgent, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				out[i], errs[i] = dialAgent(dctx, wsURL, token, fmt.Sprintf("bench-agent-%05d", first+i))
				cancel()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	var ok []*protoAgent
	var firstErr error
	for i, a := range out {
		if a != nil {
			ok = append(ok, a)
		} else if firstErr == nil {
			firstErr = fmt.Errorf("agent %d: %w", first+i, errs[i])
		}
	}
	return ok, firstErr
}

// queueCurve parks jobs level by level (parkfan deliveries of parkLegs
// legs each) and, at each level, measures how fast they were created, the
// store's size, the orchestrator's RSS and trigger → job.dispatch to an
// agent that takes the curve workflow's jobs.
func queueCurve(ctx context.Context, cfg Config, levels []int, latRuns int, root, engine, repo, sha string, extra []string, set setter, note func(string, ...any)) error {
	o, src, err := startWithSource(cfg.Bin, root, engine+"-curve-queue", repo, extra...)
	if err != nil {
		return err
	}
	defer o.stop()
	workTok, err := o.mintToken("bench-worker")
	if err != nil {
		return err
	}
	w, err := dialWorker(ctx, "ws"+strings.TrimPrefix(o.url, "http")+"/ws", workTok, "bench-worker-0", []string{"bench-worker"})
	if err != nil {
		return err
	}
	defer w.close()
	if _, err := dispatchLatency(ctx, o, src, sha, w, 2); err != nil { // warm up
		return err
	}
	parked, runs := 0, 0
	var perJobKB, p99 []float64
	var reached []int
	for _, n := range levels {
		deliveries := (n - parked + parkLegs - 1) / parkLegs
		note("%s: parking %d more jobs (%d deliveries of %d legs)", engine, deliveries*parkLegs, deliveries, parkLegs)
		before, err := o.runsTotal("")
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, _, err := burst(o, src, fmt.Sprintf("parkfan-%d", runs), sha, deliveries, 4, 4); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		err = o.waitRuns(wctx, "", before+deliveries)
		cancel()
		if err != nil {
			return err
		}
		took := time.Since(t0)
		runs += deliveries
		parked += deliveries * parkLegs
		lat, err := dispatchLatency(ctx, o, src, sha, w, latRuns)
		if err != nil {
			return err
		}
		size := storeSize(o, extra)
		reached = append(reached, parked)
		perJobKB = append(perJobKB, float64(size)/1024/float64(parked))
		p99 = append(p99, float64(percentile(lat, 99)))
		set(fmt.Sprintf("queued %d", parked), "", engine,
			fmt.Sprintf("%.0f/s · %.0f MB (%.1f KB) · %.0f MB · %s/%s",
				float64(deliveries*parkLegs)/took.Seconds(), float64(size)/(1<<20), perJobKB[len(perJobKB)-1],
				float64(o.rssKB())/1024, ms(percentile(lat, 50)), ms(percentile(lat, 99))))
	}
	set("queued: growth", "linear; dispatch flat", engine, growth(reached, map[string][]float64{"store per job": perJobKB, "dispatch p99": p99}))
	return nil
}

// nodesCurve runs trivial runs on 1 and 3 orchestrators sharing one
// PostgreSQL database (each spawning its own agents) and measures runs per
// second and the orchestrators' CPU per run.
func nodesCurve(ctx context.Context, cfg Config, cs curveSizes, root, repo, sha string, newDB func() (string, error), set setter, note func(string, ...any)) error {
	var cpuPerRun []float64
	for _, n := range cs.nodes {
		url, err := newDB()
		if err != nil {
			return err
		}
		note("postgres: %d trivial runs on %d node(s)", cs.runs, n)
		perRun, rate, err := clusterRuns(ctx, cfg, root, repo, sha, url, n, cs.runs)
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		cpuPerRun = append(cpuPerRun, float64(perRun)/float64(time.Millisecond))
		set(fmt.Sprintf("nodes %d", n), "", "postgres", fmt.Sprintf("%.1f/s · %.1f ms", rate, cpuPerRun[len(cpuPerRun)-1]))
	}
	set("nodes: growth", "linear", "postgres", growth(cs.nodes, map[string][]float64{"CPU per run": cpuPerRun}))
	return nil
}

// clusterRuns starts n nodes on the database at url, spreads runs trivial
// pushes over them and returns the nodes' summed CPU per run and the runs
// per second.
func clusterRuns(ctx context.Context, cfg Config, root, repo, sha, url string, n, runs int) (time.Duration, float64, error) {
	env := []string{"KICI_DATABASE_URL=" + url, "KICI_SECRET_KEY=" + strings.Repeat("b7", 32), "KICI_MAX_AGENTS=4"}
	var nodes []*orch
	defer func() {
		for _, o := range nodes {
			o.stop()
		}
	}()
	var srcs []*source
	for i := range n {
		dir, err := dataDir(root, fmt.Sprintf("postgres-nodes%d-%d", n, i))
		if err != nil {
			return 0, 0, err
		}
		o, err := startOrch(cfg.Bin, dir, env...)
		if err != nil {
			return 0, 0, err
		}
		nodes = append(nodes, o)
		if i == 0 {
			s, err := o.addSource(repo, "bench")
			if err != nil {
				return 0, 0, err
			}
			srcs = append(srcs, s)
		} else {
			srcs = append(srcs, srcs[0])
		}
	}
	// Warm every node's agent binary and the repository.
	for i, o := range nodes {
		if _, err := triggerToStep(ctx, o, srcs[i], sha, 1); err != nil {
			return 0, 0, err
		}
	}
	before, err := nodes[0].runsTotal("success")
	if err != nil {
		return 0, 0, err
	}
	var cpu0 time.Duration
	for _, o := range nodes {
		cpu0 += cpuOf(o.cmd.Process.Pid)
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, o := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			share := runs / n
			if i < runs%n {
				share++
			}
			_, _, errs[i] = burst(o, srcs[i], fmt.Sprintf("triv-n%d", i), sha, share, 8/n+1, 8)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	err = nodes[0].waitRuns(wctx, "success", before+runs)
	cancel()
	if err != nil {
		return 0, 0, err
	}
	wall := time.Since(t0)
	var cpu time.Duration
	for _, o := range nodes {
		cpu += cpuOf(o.cmd.Process.Pid)
	}
	return (cpu - cpu0) / time.Duration(runs), float64(runs) / wall.Seconds(), nil
}

// cpuOf is the CPU time (user + system) process pid has used, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields count from the
	// closing parenthesis.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// raiseFDLimit lifts this process's open-file limit to its hard limit:
// ten thousand agents are ten thousand sockets on each side, and the
// orchestrator started from here inherits the limit.
func raiseFDLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// storeSize is the size of o's database in bytes: the SQLite files in its
// data directory, or the PostgreSQL database named in extra.
func storeSize(o *orch, extra []string) int64 {
	for _, kv := range extra {
		if url, ok := strings.CutPrefix(kv, "KICI_DATABASE_URL="); ok {
			return pgDatabaseSize(url)
		}
	}
	var total int64
	for _, f := range []string{"kici.db", "kici.db-wal"} {
		if fi, err := os.Stat(o.dataDir + "/" + f); err == nil {
			total += fi.Size()
		}
	}
	return total
}

// pgDatabaseSize is pg_database_size of the database at url, 0 when it
// cannot be read.
func pgDatabaseSize(url string) int64 {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return 0
	}
	defer db.Close()
	var n int64
	_ = db.QueryRow(`SELECT pg_database_size(current_database())`).Scan(&n)
	return n
}
