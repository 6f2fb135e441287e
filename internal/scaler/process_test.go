package scaler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

var _ dispatch.Spawner = (*Process)(nil)
var _ dispatch.SpawnStopper = (*Process)(nil)

// fakeAgent records its environment, starts a grandchild that ignores
// SIGTERM (so only the SIGKILL escalation can end it), and waits.
const fakeAgent = `#!/bin/sh
env > "$KICI_WORK_DIR/$KICI_AGENT_ID.env"
sh -c 'trap "" TERM; exec sleep 300' &
echo $! > "$KICI_WORK_DIR/$KICI_AGENT_ID.child"
echo started
wait
`

type fixture struct {
	p    *Process
	aa   *auth.AgentAuth
	st   store.Store
	work string
	logs string
}

func newFixture(t *testing.T, script string, max int) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bin := filepath.Join(dir, "kici-agent")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{aa: auth.NewAgentAuth(st), st: st, work: filepath.Join(dir, "work"), logs: filepath.Join(dir, "agents")}
	f.p = NewProcess(ProcessConfig{AgentBinary: bin, OrchestratorURL: "ws://127.0.0.1:1/ws", MaxAgents: max,
		TokenTTL: time.Hour, WorkDir: f.work, LogDir: f.logs, Hostname: "buildhost"}, f.aa, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		f.p.Shutdown(ctx)
	})
	return f
}

func waitFile(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never written", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestSpawnEnvTokenLogAndShutdown(t *testing.T) {
	t.Setenv("KICI_BOOTSTRAP_ADMIN_TOKEN", "kadm_topsecret")
	t.Setenv("KICI_SECRET_KEY", "master")
	t.Setenv("KICI_SECRET_KEY_FILE", "/etc/kici/key")
	t.Setenv("KICI_DATABASE_URL", "postgres://u:p@db/kici")
	t.Setenv("KICI_PORT", "4000")
	t.Setenv("GITHUB_TOKEN", "ghp_x")
	t.Setenv("KICI_AGENT_ENV_FOO", "bar")
	t.Setenv("KICI_AGENT_ENV_MY_SECRET", "nope")
	t.Setenv("KICI_LOG_LEVEL", "debug")
	t.Setenv("PLAIN_VAR", "kept")
	f := newFixture(t, fakeAgent, 4)
	ctx := context.Background()

	id, err := f.p.Spawn(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "kici-local-") || len(id) != len("kici-local-")+8 {
		t.Fatalf("agent id %q", id)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(waitFile(t, filepath.Join(f.work, id+".env"))), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for _, k := range []string{"KICI_BOOTSTRAP_ADMIN_TOKEN", "KICI_SECRET_KEY", "KICI_SECRET_KEY_FILE",
		"KICI_DATABASE_URL", "KICI_PORT", "GITHUB_TOKEN", "MY_SECRET", "KICI_AGENT_ENV_FOO", "KICI_LABELS"} {
		if v, ok := env[k]; ok {
			t.Errorf("agent env has %s=%s", k, v)
		}
	}
	want := map[string]string{"KICI_AGENT_ID": id, "KICI_ORCHESTRATOR_URL": "ws://127.0.0.1:1/ws",
		"KICI_SCALER_MANAGED": "true", "KICI_WORK_DIR": f.work, "FOO": "bar", "PLAIN_VAR": "kept", "KICI_LOG_LEVEL": "debug"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("agent env %s=%q, want %q", k, env[k], v)
		}
	}
	if env["PATH"] == "" {
		t.Error("PATH not passed on")
	}
	tok, err := f.aa.Validate(ctx, env["KICI_AGENT_TOKEN"])
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	if tok.Kind != store.AgentTokenEphemeral || tok.BoundAgentID != id {
		t.Fatalf("token %+v", tok)
	}
	if log := waitFile(t, filepath.Join(f.logs, id+".log")); !strings.Contains(string(log), "started") {
		t.Fatalf("agent log %q", log)
	}

	// the agent leads its own process group
	child, _ := strconv.Atoi(strings.TrimSpace(string(waitFile(t, filepath.Join(f.work, id+".child")))))
	f.p.mu.Lock()
	leader := f.p.procs[id].cmd.Process.Pid
	f.p.mu.Unlock()
	if pgid, err := syscall.Getpgid(leader); err != nil || pgid != leader {
		t.Fatalf("pgid %d err %v, want %d", pgid, err, leader)
	}
	if !alive(child) {
		t.Fatal("grandchild not running")
	}

	exited := make(chan string, 1)
	f.p.OnExit(func(agentID string, err error) { exited <- agentID })
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	start := time.Now()
	f.p.Shutdown(sctx)
	if alive(leader) {
		t.Fatal("agent still running after Shutdown")
	}
	deadline := time.Now().Add(2 * time.Second)
	for alive(child) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(child) {
		t.Fatal("grandchild (ignoring SIGTERM) survived Shutdown")
	}
	if d := time.Since(start); d < 4*time.Second {
		t.Logf("shutdown took %v", d)
	}
	select {
	case got := <-exited:
		if got != id {
			t.Fatalf("OnExit(%s)", got)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("OnExit not called")
	}
	if _, err := f.p.Spawn(ctx, "job-2"); err == nil {
		t.Fatal("spawn after shutdown succeeded")
	}
}

func TestMaxAgentsAndExitReleasesSlot(t *testing.T) {
	f := newFixture(t, "#!/bin/sh\nexec sleep 300\n", 2)
	ctx := context.Background()
	var mu sync.Mutex
	exits := map[string]error{}
	f.p.OnExit(func(agentID string, err error) {
		mu.Lock()
		exits[agentID] = err
		mu.Unlock()
	})
	a, err := f.p.Spawn(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Spawn(ctx, "j2"); err != nil {
		t.Fatal(err)
	}
	_, err = f.p.Spawn(ctx, "j3")
	if !errors.Is(err, ErrAtCapacity) || !errors.Is(err, dispatch.ErrAtCapacity) || err.Error() != "scaler at capacity (2/2 agents)" {
		t.Fatalf("third spawn: %v", err)
	}
	if f.p.Active() != 2 {
		t.Fatalf("active %d", f.p.Active())
	}
	// stopping one frees its slot and reports the exit
	f.p.Stop(a)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		_, done := exits[a]
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("exit not reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.p.Spawn(ctx, "j3"); err != nil {
		t.Fatalf("spawn after a slot freed: %v", err)
	}
}

func TestCanServe(t *testing.T) {
	p := NewProcess(ProcessConfig{Hostname: "buildhost"}, nil, nil)
	os := "kici:os:" + runtime.GOOS
	if !p.CanServe(nil) || !p.CanServe([]string{os}) || !p.CanServe([]string{os, "kici:host:buildhost", "kici:arch:" + runtime.GOARCH}) {
		t.Fatal("auto labels refused")
	}
	if runtime.GOARCH == "amd64" && !p.CanServe([]string{"kici:arch:x64"}) {
		t.Fatal("x64 alias refused")
	}
	if p.CanServe([]string{"gpu"}) || p.CanServe([]string{"kici:host:otherhost"}) || p.CanServe([]string{os, "docker"}) {
		t.Fatal("foreign label accepted")
	}
}
