package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/healthcheck"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// probe GETs url+path the way a load balancer's probe does (with the
// healthcheck's timeout) and returns the status code and body; a probe
// that does not answer within that timeout fails the test.
func probe(t *testing.T, url, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: healthcheck.DefaultTimeout}
	resp, err := c.Get(url + path)
	if err != nil {
		t.Fatalf("GET %s: %v (a probe must answer within %s)", path, err, healthcheck.DefaultTimeout)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// healthcheckReady runs `kici-orchestrator healthcheck --ready` against o
// and returns its exit code and output.
func healthcheckReady(t *testing.T, o *orchestrator) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kici-orchestrator"), "healthcheck", "--ready", "--url", o.url)
	cmd.Env = cleanEnv()
	return exitCode(t, cmd)
}

// exitCode runs cmd and returns its exit code and combined output.
func exitCode(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// With its PostgreSQL stopped, a node answers /ready 503 naming the
// database (every answer within the probe timeout), its healthcheck
// --ready exits 1 and kici-admin diagnose reports the 503; /health, the
// liveness probe, stays 200. Once PostgreSQL is back the node is ready
// again without a restart.
func TestReadyFollowsTheDatabase(t *testing.T) {
	pg := pgtest.NewServer(t)
	o := startOrchestrator(t, "KICI_DATABASE_URL="+pg.URL(t))
	if code, body := probe(t, o.url, "/ready"); code != http.StatusOK {
		t.Fatalf("/ready with the database up: %d %s", code, body)
	}
	if code, out := healthcheckReady(t, o); code != 0 {
		t.Fatalf("healthcheck --ready with the database up: exit %d %s", code, out)
	}

	pg.Stop(t)
	stopped := time.Now()
	wait.For(t, 15*time.Second, "/ready to answer 503 with the database stopped", func() bool {
		code, _ := probe(t, o.url, "/ready")
		return code == http.StatusServiceUnavailable
	})
	t.Logf("/ready answered 503 %.1f s after PostgreSQL stopped", time.Since(stopped).Seconds())
	if code, body := probe(t, o.url, "/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "database unreachable") {
		t.Fatalf("/ready with the database down: %d %s, want 503 naming the database", code, body)
	}
	if code, body := probe(t, o.url, "/health"); code != http.StatusOK {
		t.Fatalf("/health (liveness) with the database down: %d %s, want 200", code, body)
	}
	if code, out := healthcheckReady(t, o); code != 1 || !strings.Contains(out, "database unreachable") {
		t.Fatalf("healthcheck --ready with the database down: exit %d %q, want 1 naming the database", code, out)
	}
	if out := o.admin(t, "diagnose"); !strings.Contains(out, "HTTP 503: Not ready: database unreachable") {
		t.Fatalf("kici-admin diagnose with the database down does not report it:\n%s", out)
	}

	pg.Start(t)
	last := ""
	wait.For(t, 30*time.Second, "/ready to answer 200 after PostgreSQL restarted", func() bool {
		code, body := probe(t, o.url, "/ready")
		if body != last {
			t.Logf("/ready: %d %s", code, body)
			last = body
		}
		return code == http.StatusOK
	})
	if code, out := healthcheckReady(t, o); code != 0 {
		t.Fatalf("healthcheck --ready after the database came back: exit %d %s", code, out)
	}

	// A schema rolled back under the running node: not ready until it is
	// migrated up again.
	status := migrateCmd(t, o, 0, "status")
	var have, want int64
	if _, err := fmt.Sscanf(status, "schema version %d; this binary's %d", &have, &want); err != nil || have != want {
		t.Fatalf("migrate status: %q (%v), want the schema at this binary's version", status, err)
	}
	// Rolled back under a running node: down-to names it, since the
	// chunks it writes compressed meanwhile are not rewritten.
	if out := migrateCmd(t, o, 0, "down-to", strconv.FormatInt(want-1, 10)); !strings.Contains(out, "warning: nodes heartbeated in the last") ||
		!strings.Contains(out, strings.TrimSpace(readFile(t, filepath.Join(o.dataDir, "node-id")))) {
		t.Errorf("down-to under a running node did not name it:\n%s", out)
	}
	migrateCmd(t, o, 1, "status")
	wait.For(t, 15*time.Second, "/ready to answer 503 with the schema rolled back", func() bool {
		code, body := probe(t, o.url, "/ready")
		return code == http.StatusServiceUnavailable && strings.Contains(body, fmt.Sprintf("schema is at version %d, this node needs %d", want-1, want))
	})
	migrateCmd(t, o, 0, "up")
	wait.For(t, 15*time.Second, "/ready to answer 200 with the schema migrated up again", func() bool {
		code, _ := probe(t, o.url, "/ready")
		return code == http.StatusOK
	})
}

// migrateCmd runs `kici-orchestrator migrate args…` with o's environment,
// expects exit code want and returns its output.
func migrateCmd(t *testing.T, o *orchestrator, want int, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kici-orchestrator"), append([]string{"migrate"}, args...)...)
	cmd.Env = append(cleanEnv(), o.env...)
	code, out := exitCode(t, cmd)
	if code != want {
		t.Fatalf("kici-orchestrator migrate %v: exit %d, want %d:\n%s", args, code, want, out)
	}
	return out
}

// A node drained on its own while another node takes work is not ready
// (a load balancer stops sending it requests before it is stopped); when
// every node drains they all stay ready, so webhooks are still accepted
// and queued; resumed, the node is ready again.
func TestReadyDrainingNodeLeavesTheBalancer(t *testing.T) {
	db := "KICI_DATABASE_URL=" + pgtest.URL(t)
	a := startIn(t, t.TempDir(), db)
	b := startIn(t, t.TempDir(), db)
	var self struct {
		Self string `json:"self"`
	}
	b.get(t, "/api/v1/admin/cluster/nodes", &self)

	a.admin(t, "orchestrator", "drain", "--node", self.Self)
	waitDraining(t, b, true)
	wait.For(t, 15*time.Second, "the drained node B to answer /ready 503", func() bool {
		code, _ := probe(t, b.url, "/ready")
		return code == http.StatusServiceUnavailable
	})
	if code, body := probe(t, b.url, "/ready"); !strings.Contains(body, "draining") {
		t.Fatalf("B's /ready while drained: %d %s, want the drain named", code, body)
	}
	if code, body := probe(t, a.url, "/ready"); code != http.StatusOK {
		t.Fatalf("A (not drained) /ready: %d %s", code, body)
	}

	a.admin(t, "orchestrator", "drain")
	waitDraining(t, a, true)
	for _, o := range []*orchestrator{a, b} {
		if code, body := probe(t, o.url, "/ready"); code != http.StatusOK {
			t.Fatalf("%s /ready with every node draining: %d %s, want 200 (somebody must accept webhooks)", o.url, code, body)
		}
	}

	a.admin(t, "orchestrator", "resume")
	waitDraining(t, b, false)
	if code, body := probe(t, b.url, "/ready"); code != http.StatusOK {
		t.Fatalf("B's /ready after resume: %d %s", code, body)
	}
}
