package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
)

// clusterHarness is N kici-orchestrator processes on one throwaway
// PostgreSQL database, each with its own data directory and a fixed port, so
// a node can be killed and started again at the same address. Tests of
// several nodes (failover, shared logs, cross-node wake-ups and the
// acceptance tests of issue 13) build on it.
type clusterHarness struct {
	// DatabaseURL is the PostgreSQL URL every node shares.
	DatabaseURL string
	// Nodes are the running processes, by index; a killed node keeps its
	// slot (Restart starts it again).
	Nodes []*orchestrator
	dirs  []string
	ports []int
	env   []string
}

// startClusterHarness starts n orchestrators on one new PostgreSQL database
// with extraEnv on every node (on top of KICI_DATA_DIR, KICI_PORT,
// KICI_DATABASE_URL and a shared KICI_SECRET_KEY). Every node is stopped at the test's cleanup.
func startClusterHarness(t *testing.T, n int, extraEnv ...string) *clusterHarness {
	t.Helper()
	c := &clusterHarness{DatabaseURL: pgtest.URL(t)}
	// Every node of a cluster shares the master key (webhook secrets and
	// every other secret in the database are sealed with it).
	c.env = append([]string{"KICI_DATABASE_URL=" + c.DatabaseURL, "KICI_SECRET_KEY=" + haSecretKey}, extraEnv...)
	for i := 0; i < n; i++ {
		c.dirs = append(c.dirs, t.TempDir())
		c.ports = append(c.ports, freePort(t))
		c.Nodes = append(c.Nodes, nil)
	}
	// Every node learns the others' addresses from the node registry; an
	// agent spawned by a node gets them all (KICI_ORCHESTRATOR_URL list).
	for i := range c.Nodes {
		c.Start(t, i)
	}
	return c
}

// Start starts node i (again) on its data directory and port.
func (c *clusterHarness) Start(t *testing.T, i int) *orchestrator {
	t.Helper()
	c.Nodes[i] = startOrchestratorAt(t, c.dirs[i], c.ports[i], c.env...)
	return c.Nodes[i]
}

// Kill9 SIGKILLs node i.
func (c *clusterHarness) Kill9(t *testing.T, i int) { c.Nodes[i].kill9(t) }

// Stop stops node i gracefully (SIGTERM).
func (c *clusterHarness) Stop(t *testing.T, i int) { c.Nodes[i].stop(t) }

// URLs is every node's base URL, comma-separated: the form
// KICI_ORCHESTRATOR_URL takes for an agent that fails over between nodes.
func (c *clusterHarness) URLs() string {
	var u []string
	for i, o := range c.Nodes {
		if o != nil && o.url != "" {
			u = append(u, o.url)
		} else {
			u = append(u, fmt.Sprintf("http://127.0.0.1:%d", c.ports[i]))
		}
	}
	return strings.Join(u, ",")
}

// NodeLog returns what node i's current process has logged so far.
func (c *clusterHarness) NodeLog(t *testing.T, i int) string {
	t.Helper()
	b, _ := os.ReadFile(c.Nodes[i].logPath)
	return string(b)
}

// WSURL is node i's agent WebSocket URL (ws://127.0.0.1:<port>/ws).
func (c *clusterHarness) WSURL(i int) string {
	return fmt.Sprintf("ws://127.0.0.1:%d/ws", c.ports[i])
}

// WSURLs is every node's agent WebSocket URL, comma-separated, starting
// with node first: an agent given it dials node first and fails over to
// the others in turn.
func (c *clusterHarness) WSURLs(first int) string {
	var u []string
	for k := range c.ports {
		u = append(u, c.WSURL((first+k)%len(c.ports)))
	}
	return strings.Join(u, ",")
}

// MintStaticToken issues a static agent token (no label scope) in the
// shared database and returns its plain value.
func (c *clusterHarness) MintStaticToken(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, c.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok, _, err := auth.NewAgentAuth(st).IssueStatic(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// clusterAgent is a static kici-agent process started by StartStaticAgent.
type clusterAgent struct {
	Cmd     *exec.Cmd
	LogPath string
}

// Log returns what the agent has logged so far.
func (a *clusterAgent) Log() string {
	b, _ := os.ReadFile(a.LogPath)
	return string(b)
}

// StartStaticAgent runs kici-agent with id, token, label static-box and
// KICI_ORCHESTRATOR_URL=urls (one URL or a comma-separated list), plus
// extraEnv; it is stopped (SIGTERM, then SIGKILL after 20 s) at cleanup and
// its log printed when the test failed.
func (c *clusterHarness) StartStaticAgent(t *testing.T, id, token, urls string, extraEnv ...string) *clusterAgent {
	t.Helper()
	a := &clusterAgent{LogPath: filepath.Join(t.TempDir(), id+".log")}
	logFile, err := os.Create(a.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "kici-agent"))
	cmd.Env = append(cleanEnv(), "KICI_ORCHESTRATOR_URL="+urls, "KICI_AGENT_TOKEN="+token, "KICI_AGENT_ID="+id,
		"KICI_LABELS=static-box", "KICI_WORK_DIR="+stepDir(t, 0o711))
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.Cmd = cmd
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		logFile.Close()
		if t.Failed() {
			t.Logf("agent log %s:\n%s", id, a.Log())
		}
	})
	return a
}

// logHasLine reports whether one line of a process log holds every part
// (slog text lines: msg="…" key=value …).
func logHasLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
