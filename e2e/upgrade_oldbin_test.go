package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// upgradeLoad is how many runs go through each node at each step of the
// rolling upgrade from the previous release: 2 in make test, more under
// make test-ha (upgrade_oldbin_ha_test.go).
var upgradeLoad = 2

// upgradeWorkflow's job runs a few seconds and prints its first and last
// lines. It writes no marks: the previous release's agents do not share a
// marks directory with the test.
const upgradeWorkflow = `name: upgrade
on: {push: {branches: [main]}}
jobs:
  hold:
    steps:
      - run: |
          echo "start $KICI_RUN_ID"
          sleep 3
          echo "done $KICI_RUN_ID"
`

// chunkForms counts the step-log chunks in the database at url stored
// plain and compressed (internal/logstore/pgchunk.go).
func chunkForms(t *testing.T, url string) (plain, compressed int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE get_byte(body, 0) = 123), count(*) FILTER (WHERE get_byte(body, 0) = 0)
		FROM step_log_chunks`).Scan(&plain, &compressed); err != nil {
		t.Fatal(err)
	}
	return plain, compressed
}

// pushRuns pushes n runs of repo through o and returns their delivery ids
// and run ids.
func pushRuns(t *testing.T, o *orchestrator, repo, source string, n int) (deliveries, runs []string) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, d := o.push(t, repo, source)
		deliveries = append(deliveries, d)
		runs = append(runs, o.runOf(t, d))
	}
	return deliveries, runs
}

// The rolling upgrade of docs/upgrade.md from the previous release's real
// binaries (built from this repository's history) to this build, on
// PostgreSQL, under load: two nodes of the previous release (orchestrator
// and the agents it spawns) run jobs; each node in turn is drained (new
// runs go through the other node meanwhile), its jobs finish, it is
// stopped and started again with the new binary (the first one migrates
// the schema while the other, old, node keeps serving on it) and resumed. Every
// accepted delivery made exactly one run, every run succeeded and every
// job's log is complete. While an old node is live the new ones write
// step-log chunks plain; once all are new, compressed. An old binary then refuses the newer schema; the
// documented rollback (new binary's `migrate down-to` the previous
// version, which rewrites compressed chunks plain, then the old binary)
// serves every run unchanged and runs new work.
func TestUpgradeRollingFromPreviousReleaseBinariesLosesNothing(t *testing.T) {
	commit, prev, head := previousRelease(t)
	buildStart := time.Now()
	oldBins, hash := oldBinaries(t, commit)
	t.Logf("previous release %s (PostgreSQL schema %d, this build %d); binaries ready in %s", hash[:12], prev, head, time.Since(buildStart).Round(time.Millisecond))
	start := time.Now()

	repo := repoWithWorkflow(t, upgradeWorkflow)
	c := &clusterHarness{DatabaseURL: pgtest.URL(t)}
	c.env = []string{"KICI_DATABASE_URL=" + c.DatabaseURL, "KICI_SECRET_KEY=" + haSecretKey}
	startNode := func(i int, bins string) {
		c.Nodes[i] = startOrchestratorFrom(t, bins, c.dirs[i], c.ports[i], c.env...)
	}
	for i := 0; i < 2; i++ {
		c.dirs = append(c.dirs, t.TempDir())
		c.ports = append(c.ports, freePort(t))
		c.Nodes = append(c.Nodes, nil)
		startNode(i, oldBins)
	}
	source := addLocalSource(t, c.Nodes[0], repo)
	var deliveries, runs []string
	load := func(o *orchestrator) []string {
		d, r := pushRuns(t, o, repo, source, upgradeLoad)
		deliveries, runs = append(deliveries, d...), append(runs, r...)
		return r
	}
	load(c.Nodes[0])
	load(c.Nodes[1])

	for i := 0; i < 2; i++ {
		o, other := c.Nodes[i], c.Nodes[1-i]
		id := strings.TrimSpace(readFile(t, filepath.Join(o.dataDir, "node-id")))
		o.admin(t, "orchestrator", "drain", "--node", id)
		before := append([]string(nil), runs...)
		// Load while the node drains and is replaced: runs through the
		// other node.
		load(other)
		// Drained: every run accepted before the drain has ended.
		allSucceeded(t, other, before)
		exited := sigterm(t, o)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("node %d did not stop within 60 s", i)
		}
		startNode(i, binDir)
		// Still drained (the flag survives the restart), so not ready
		// while the other node takes work: resume it, then it is ready.
		if code, body := probe(t, c.Nodes[i].url, "/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
			t.Errorf("upgraded node %d before resume: /ready %d %s, want 503 draining", i, code, body)
		}
		c.Nodes[i].admin(t, "orchestrator", "resume", "--node", id)
		wait.For(t, 60*time.Second, "the upgraded node to be ready", func() bool {
			code, _ := probe(t, c.Nodes[i].url, "/ready")
			return code == http.StatusOK
		})
		if out := migrateCmd(t, c.Nodes[i], 0, "status"); !strings.HasPrefix(out, "schema version "+strconv.Itoa(head)+";") {
			t.Fatalf("after upgrading node %d: %s", i, out)
		}
		load(c.Nodes[i])
		if i == 0 {
			// One node new, the other old: the new node writes plain
			// chunks, which the old one reads.
			allSucceeded(t, c.Nodes[0], runs)
			if _, compressed := chunkForms(t, c.DatabaseURL); compressed != 0 {
				t.Errorf("%d compressed step-log chunks written while a node of the previous release was live", compressed)
			}
		}
	}
	allSucceeded(t, c.Nodes[0], runs)
	// Every node new: they say they read compressed chunks, and the last
	// runs' chunks were written so.
	var registry struct {
		Nodes []struct {
			ID                  string `json:"id"`
			ReadsCompressedLogs bool   `json:"readsCompressedLogs"`
		} `json:"nodes"`
	}
	c.Nodes[0].get(t, "/api/v1/admin/cluster/nodes", &registry)
	for _, n := range registry.Nodes {
		if !n.ReadsCompressedLogs {
			t.Errorf("upgraded node %s does not say it reads compressed step-log chunks", n.ID)
		}
	}
	if _, compressed := chunkForms(t, c.DatabaseURL); compressed == 0 {
		t.Error("no compressed step-log chunk written once every node was upgraded")
	}
	for _, d := range deliveries {
		var list struct {
			Runs []runView `json:"runs"`
		}
		c.Nodes[1].get(t, "/api/v1/admin/runs?deliveryId="+d, &list)
		if len(list.Runs) != 1 {
			t.Errorf("delivery %s made %d runs, want exactly 1", d, len(list.Runs))
		}
	}
	records := map[string]string{}
	for _, r := range runs {
		j := c.Nodes[1].jobsOf(t, r)["hold"]
		log := c.Nodes[1].logText(t, r, j.JobID, 0)
		if !strings.Contains(log, "done "+r) {
			t.Errorf("run %s: job log lacks its last line %q:\n%s", r, "done "+r, log)
		}
		records[r] = j.Status + " " + log
	}
	t.Logf("rolling upgrade %s → this build under load: %d deliveries, %d runs, all success (%s)", hash[:12], len(deliveries), len(runs), time.Since(start).Round(time.Second))

	// Rollback: every node of the new release stopped, the schema rolled
	// back by the new binary, the old binary started.
	c.Nodes[0].stop(t)
	c.Nodes[1].stop(t)
	refuse := exec.Command(filepath.Join(oldBins, "kici-orchestrator"))
	base := slices.DeleteFunc(cleanEnv(), func(kv string) bool { return strings.HasPrefix(kv, "KICI_STEP_SHARED_PATHS=") })
	refuse.Env = append(base, append(c.Nodes[0].env, "KICI_PORT="+strconv.Itoa(c.ports[0]))...)
	if code, out := exitCode(t, refuse); code == 0 || !strings.Contains(out, "newer than this binary's "+strconv.Itoa(prev)) {
		t.Fatalf("the previous release on the new schema: exit %d, want a refusal naming version %d:\n%s", code, prev, out)
	}
	if out := migrateCmd(t, c.Nodes[0], 0, "down-to", strconv.Itoa(prev)); !strings.Contains(out, "rewritten plain") {
		t.Errorf("down-to the previous release's schema said nothing of rewriting compressed chunks:\n%s", out)
	}
	if _, compressed := chunkForms(t, c.DatabaseURL); compressed != 0 {
		t.Fatalf("%d compressed step-log chunks left for the previous release after down-to", compressed)
	}
	startNode(0, oldBins)
	o := c.Nodes[0]
	if code, body := probe(t, o.url, "/ready"); code != http.StatusOK {
		t.Fatalf("/ready of the previous release after the rollback: %d %s", code, body)
	}
	for r, want := range records {
		j := o.jobsOf(t, r)["hold"]
		if got := j.Status + " " + o.logText(t, r, j.JobID, 0); got != want {
			t.Errorf("run %s changed across the rollback:\nbefore %s\nafter  %s", r, want, got)
		}
	}
	_, after := pushRuns(t, o, repo, source, 1)
	allSucceeded(t, o, after)
	t.Logf("rollback to %s: %d runs unchanged, a new run succeeded (%s in all)", hash[:12], len(records), time.Since(start).Round(time.Second))
}
