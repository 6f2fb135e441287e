package scaler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// fakeAgent records its environment, starts a grandchild that ignores
// SIGTERM (so only the SIGKILL escalation can end it), and waits.
const fakeAgent = `#!/bin/sh
{ cat <&3; echo; } > "$KICI_WORK_DIR/$KICI_AGENT_ID.token"
env > "$KICI_WORK_DIR/$KICI_AGENT_ID.env"
sh -c 'trap "" TERM; exec sleep 300' &
echo $! > "$KICI_WORK_DIR/$KICI_AGENT_ID.child"
echo started
wait
`

func waitFile(t *testing.T, path string) []byte {
	t.Helper()
	var b []byte
	wait.For(t, 5*time.Second, path+" to be written", func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && len(b) > 0 && b[len(b)-1] == '\n'
	})
	return b
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

func TestBareMetalEnvGroupAndDestroyEscalation(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kici-agent")
	if err := os.WriteFile(bin, []byte(fakeAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	environ := []string{"PATH=" + os.Getenv("PATH"), "KICI_BOOTSTRAP_ADMIN_TOKEN=kadm_x", "KICI_SECRET_KEY=master",
		"KICI_DATABASE_URL=postgres://u:p@db/k", "KICI_PORT=4000", "GITHUB_TOKEN=ghp_x", "KICI_AGENT_ENV_FOO=bar",
		"KICI_AGENT_ENV_MY_SECRET=nope", "KICI_LOG_LEVEL=debug", "PLAIN_VAR=kept"}
	var mu sync.Mutex
	exits := map[string]error{}
	work := filepath.Join(dir, "work")
	b := NewBareMetal(BareMetalOptions{AgentBinary: bin, WorkDir: work, LogDir: filepath.Join(dir, "agents"),
		Environ: environ, StopGrace: time.Second, HidePaths: []string{"/srv/kici-data", "/etc/kici"}}, func(id string, err error) {
		mu.Lock()
		exits[id] = err
		mu.Unlock()
	})
	var events []string
	req := &SpawnRequest{AgentID: "scaler-bare-metal-0000abcd", JobID: "job-1", OrchestratorURL: "ws://127.0.0.1:1/ws",
		Token: "kat_tok", Entry: &Entry{Name: "s", Type: TypeBareMetal},
		LabelSet: &LabelSet{Labels: []string{"linux", "big"}, Env: map[string]string{"EXTRA": "1"}},
		Emit:     func(et EventType, d string) { events = append(events, string(et)+" "+d) }}
	if err := b.Spawn(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(waitFile(t, filepath.Join(work, req.AgentID+".env"))), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for _, k := range []string{"KICI_BOOTSTRAP_ADMIN_TOKEN", "KICI_SECRET_KEY", "KICI_DATABASE_URL", "KICI_PORT", "GITHUB_TOKEN", "MY_SECRET", "KICI_AGENT_ENV_FOO", "KICI_AGENT_TOKEN"} {
		if v, ok := env[k]; ok {
			t.Errorf("agent env has %s=%s", k, v)
		}
	}
	// The token arrives on descriptor 3, never in the environment.
	if tok := string(waitFile(t, filepath.Join(work, req.AgentID+".token"))); tok != "kat_tok\n" {
		t.Errorf("token read from KICI_AGENT_TOKEN_FD = %q, want kat_tok", tok)
	}
	if fi, err := os.Stat(work); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("work dir mode: %v %v, want 0700", fi, err)
	}
	want := map[string]string{"KICI_AGENT_ID": req.AgentID, "KICI_ORCHESTRATOR_URL": "ws://127.0.0.1:1/ws", "KICI_AGENT_TOKEN_FD": "3",
		"KICI_SCALER_MANAGED": "true", "KICI_WORK_DIR": work, "KICI_LABELS": "linux,big", "FOO": "bar", "EXTRA": "1",
		"PLAIN_VAR": "kept", "KICI_LOG_LEVEL": "debug", "KICI_AGENT_HIDE_PATHS": "/srv/kici-data:/etc/kici"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("agent env %s=%q, want %q", k, env[k], v)
		}
	}
	if len(events) != 1 || !strings.Contains(events[0], "started") {
		t.Errorf("events %v", events)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(waitFile(t, filepath.Join(work, req.AgentID+".child")))))
	b.mu.Lock()
	leader := b.procs[req.AgentID].cmd.Process.Pid
	b.mu.Unlock()
	if pgid, err := syscall.Getpgid(leader); err != nil || pgid != leader {
		t.Fatalf("agent is not its own process group leader: pgid %d err %v", pgid, err)
	}
	start := time.Now()
	if err := b.Destroy(context.Background(), req.AgentID); err != nil {
		t.Fatal(err)
	}
	// The shell leader dies on SIGTERM at once; the grandchild ignores it
	// and must be killed by the SIGKILL after the grace.
	wait.Until(3*time.Second, func() bool { return !alive(leader) && !alive(child) })
	if alive(leader) || alive(child) {
		t.Fatal("agent process group survived Destroy")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("destroy took %v", d)
	}
	mu.Lock()
	_, reported := exits[req.AgentID]
	mu.Unlock()
	if !reported || b.Active() != 0 {
		t.Fatalf("exit reported=%v active=%d", reported, b.Active())
	}
	b.Shutdown(context.Background())
	if err := b.Spawn(context.Background(), req); err == nil {
		t.Fatal("spawn after shutdown succeeded")
	}
}

func TestBareMetalCgroupsDegradeAndArgv(t *testing.T) {
	argv := cgroupArgv("scaler-bare-metal-1", Limits{NanoCPUs: 1_500_000_000, MemoryBytes: 512 << 20})
	want := []string{"systemd-run", "--user", "--scope", "--quiet", "--slice=kici-scaler", "--unit=kici-agent-scaler-bare-metal-1",
		"--property=CPUQuota=150%", "--property=MemoryMax=536870912", "--"}
	if !slices.Equal(argv, want) {
		t.Fatalf("argv %v", argv)
	}
	if a := cgroupArgv("x", Limits{NanoCPUs: 1}); a[6] != "--property=CPUQuota=1%" {
		t.Fatalf("minimum quota: %v", a)
	}
	// Without a reachable user systemd the agent still starts, unwrapped,
	// and the job's provisioning log says the limits are not enforced.
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	_ = os.WriteFile(bin, []byte("#!/bin/sh\necho \"$0\" > \"$KICI_WORK_DIR/argv0\"\n"), 0o755)
	done := make(chan struct{})
	b := NewBareMetal(BareMetalOptions{AgentBinary: bin, WorkDir: dir, LogDir: dir,
		CgroupProbe: func() error { return errors.New("systemd-run --user --scope failed: no bus") }},
		func(string, error) { close(done) })
	var events []string
	err := b.Spawn(context.Background(), &SpawnRequest{AgentID: "a1", Entry: &Entry{Name: "s", Type: TypeBareMetal, EnforceCgroups: true},
		LabelSet: &LabelSet{Labels: []string{"x"}}, Limits: Limits{MemoryBytes: 1 << 30},
		Emit: func(_ EventType, d string) { events = append(events, d) }})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if got := strings.TrimSpace(string(waitFile(t, filepath.Join(dir, "argv0")))); got != bin {
		t.Fatalf("agent ran as %q", got)
	}
	if len(events) == 0 || !strings.Contains(events[0], "cgroup limits not enforced on this host") || strings.Contains(events[0], "no bus") {
		t.Fatalf("events %v", events)
	}
}
