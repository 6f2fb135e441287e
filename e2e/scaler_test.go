package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "kici.dev/kici/internal/store/sqlite" // registers the "sqlite" database/sql driver
	"kici.dev/kici/internal/testutil/wait"
)

// manyJobsWorkflow has 20 independent jobs (a matrix) that each take a
// moment, so they queue behind the scaler's caps.
func manyJobsWorkflow(n int, extra string) string {
	var vals []string
	for i := 1; i <= n; i++ {
		vals = append(vals, fmt.Sprintf("%q", fmt.Sprint(i)))
	}
	return `name: many
on:
  push:
    branches: [main]
jobs:
  work:
` + extra + `    matrix:
      n: [` + strings.Join(vals, ", ") + `]
    steps:
      - shell: sh
        run: |
          echo "job $KICI_MATRIX_N on $(hostname)"
          sleep 0.3
`
}

// makeWorkflowRepo creates a git repository with one workflow
// (.kici/workflows/many.yaml, which some tests rewrite) and its lock.
func makeWorkflowRepo(t *testing.T, workflow string) string {
	t.Helper()
	return repoWithWorkflows(t, map[string]string{"many.yaml": workflow})
}

type scalerView struct {
	Active  int `json:"active"`
	Scalers []struct {
		Name         string `json:"name"`
		Active       int    `json:"active"`
		Spawning     int    `json:"spawning"`
		SpawnedTotal int64  `json:"spawnedTotal"`
		FailedTotal  int64  `json:"spawnFailuresTotal"`
	} `json:"scalers"`
}

// sampler polls the scaler view and the host's agent processes until
// stopped, keeping the maxima.
type sampler struct {
	mu                     sync.Mutex
	maxActive, maxSpawning int
	maxProcs               int
	samples                int
	stop                   chan struct{}
	done                   chan struct{}
}

func startSampler(t *testing.T, o *orchestrator, procMarker string, extra func() int) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			var v scalerView
			if err := o.getQuiet("/api/v1/admin/scalers", &v); err == nil && len(v.Scalers) > 0 {
				procs := 0
				if procMarker != "" {
					// A /proc scan is not a snapshot: count only the agents
					// still alive once the scan is over, which were all
					// alive together at that instant.
					procs = len(agentOnly(agentOnly(agentProcesses(procMarker))))
				}
				if extra != nil {
					procs = extra()
				}
				s.mu.Lock()
				s.samples++
				s.maxActive = max(s.maxActive, v.Scalers[0].Active)
				s.maxSpawning = max(s.maxSpawning, v.Scalers[0].Spawning)
				s.maxProcs = max(s.maxProcs, procs)
				s.mu.Unlock()
			}
			select { // sample every 15 ms until stopped
			case <-s.stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) finish() {
	close(s.stop)
	<-s.done
}

// maxOverlap reads "start <ns>"/"end <ns>" lines and returns the largest
// number of agents alive at once and the number of starts.
func maxOverlap(t *testing.T, path string) (int, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	starts := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var kind string
		var at int64
		if _, err := fmt.Sscanf(line, "%s %d", &kind, &at); err != nil {
			t.Fatalf("lifetime line %q", line)
		}
		d := -1
		if kind == "start" {
			d = 1
			starts++
		}
		evs = append(evs, ev{at, d})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta // an end before a start at the same instant
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.delta
		best = max(best, cur)
	}
	return best, starts
}

// agentOnly keeps the live pids whose command is kici-agent and whose
// parent is not (git and step processes started by an agent inherit its
// environment, and are named kici-agent between fork and exec).
func agentOnly(pids []string) []string {
	var out []string
	for _, p := range pids {
		if comm(p) == "kici-agent" && !zombie(p) && comm(ppid(p)) != "kici-agent" {
			out = append(out, p)
		}
	}
	return out
}

func comm(pid string) string {
	b, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
	return strings.TrimSpace(string(b))
}

// ppid returns the parent pid of pid ("" if unknown).
func ppid(pid string) string {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// getQuiet is get without failing the test (for background sampling).
func (o *orchestrator) getQuiet(path string, v any) error {
	req, _ := http.NewRequest("GET", o.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// do sends an admin request with a JSON body and returns status and body.
func (o *orchestrator) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, o.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+o.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b.String()
}

// TestScalerBareMetalCaps: 20 queued jobs, maxAgents 4, maxConcurrentSpawns
// 2, real kici-agent processes through the real orchestrator: never more
// than 4 agent processes alive (sampled from /proc) nor 4 reserved, never
// more than 2 spawning, all 20 jobs succeed, no agent process remains.
func TestScalerBareMetalCaps(t *testing.T) {
	repo := makeWorkflowRepo(t, manyJobsWorkflow(20, ""))
	cfgDir := t.TempDir()
	write(t, filepath.Join(cfgDir, "scalers.yaml"), `version: 1
scalers:
  - name: metal
    type: bare-metal
    maxAgents: 4
    maxConcurrentSpawns: 2
    labelSets:
      - labels: [local]
        binaryPath: `+filepath.Join(cfgDir, "agent-wrapper")+`
`)
	// The wrapper records each agent's lifetime: the exact maximum overlap
	// complements the sampling.
	lifetimes := filepath.Join(cfgDir, "lifetimes")
	write(t, filepath.Join(cfgDir, "agent-wrapper"), "#!/bin/sh\necho \"start $(date +%s%N)\" >> "+lifetimes+
		"\n"+filepath.Join(binDir, "kici-agent")+"\nrc=$?\necho \"end $(date +%s%N)\" >> "+lifetimes+"\nexit $rc\n")
	if err := os.Chmod(filepath.Join(cfgDir, "agent-wrapper"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+filepath.Join(cfgDir, "scalers.yaml"))
	marker := "KICI_ORCHESTRATOR_URL=" + strings.Replace(o.url, "http://", "ws://", 1) + "/ws"

	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "many", "--quiet")
	s := startSampler(t, o, marker, nil)
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	r := o.waitRun(t, delivery, 3*time.Minute)
	s.finish()

	var jobs struct {
		Jobs []jobView `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+r.RunID+"/jobs", &jobs)
	ok := 0
	for _, j := range jobs.Jobs {
		if j.Status == "success" {
			ok++
		}
	}
	if r.Status != "success" || len(jobs.Jobs) != 20 || ok != 20 {
		t.Fatalf("run %s: %d jobs, %d succeeded", r.Status, len(jobs.Jobs), ok)
	}
	t.Logf("samples %d: max reserved %d, max spawning %d, max agent processes %d", s.samples, s.maxActive, s.maxSpawning, s.maxProcs)
	if s.samples < 20 || s.maxProcs == 0 {
		t.Fatalf("sampling saw nothing (%d samples, max processes %d)", s.samples, s.maxProcs)
	}
	if s.maxProcs > 4 || s.maxActive > 4 {
		t.Errorf("more than 4 agents alive: processes %d, reserved %d", s.maxProcs, s.maxActive)
	}
	overlap, starts := maxOverlap(t, lifetimes)
	t.Logf("agent lifetimes: %d agents, at most %d alive together", starts, overlap)
	if starts != 20 || overlap > 4 || overlap < 2 {
		t.Errorf("agent lifetimes: %d agents, max overlap %d; want 20 agents, overlap 2..4", starts, overlap)
	}
	if s.maxSpawning > 2 {
		t.Errorf("more than 2 spawning: %d", s.maxSpawning)
	}
	var v scalerView
	o.get(t, "/api/v1/admin/scalers", &v)
	if v.Scalers[0].SpawnedTotal < 20 || v.Scalers[0].FailedTotal != 0 {
		t.Errorf("scaler counters %+v", v.Scalers[0])
	}
	// Every agent ends with its job.
	wait.Until(10*time.Second, func() bool { return len(agentProcesses(marker)) == 0 })
	if p := agentProcesses(marker); len(p) > 0 {
		t.Errorf("agent processes remain after the run: %v", p)
	}
	// The provisioning log is on each job's setup log.
	if log := o.logText(t, r.RunID, jobs.Jobs[0].JobID, -1); !strings.Contains(log, "[scaler.provisioning]") || !strings.Contains(log, "[scaler.ready]") {
		t.Errorf("job setup log lacks the provisioning events:\n%s", log)
	}
	// Metrics: the scaler series are exposed.
	resp, err := http.Get(o.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var mb bytes.Buffer
	_, err = mb.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(mb.String(), `kici_orch_scaler_spawns_total{backend="bare-metal",scaler="metal"} 20`) ||
		!strings.Contains(mb.String(), "kici_orch_scaler_spawn_refusals_total") {
		t.Errorf("/metrics lacks the scaler series:\n%s", mb.String())
	}
}

// TestClusterSettingsTokenTTLLive: a PATCH of agentTokenTtlMs changes the
// TTL of the next spawned agent's token without a restart; bad bodies are
// refused and change nothing; null resets.
func TestClusterSettingsTokenTTLLive(t *testing.T) {
	repo := makeWorkflowRepo(t, manyJobsWorkflow(1, ""))
	o := startOrchestrator(t)
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "one", "--quiet")

	for _, bad := range []string{`{"agentTokenTtlMs": 5}`, `{"agentTokenTTL": 5000}`, `{"agentTokenTtlMs": "5000"}`, `{"agentTokenTtlMs": 1.5}`, `[]`, `{}`} {
		if code, body := o.do(t, "PATCH", "/api/v1/admin/cluster-settings", bad); code != 400 {
			t.Errorf("PATCH %s: %d %s, want 400", bad, code, body)
		}
	}
	tokenTTLs := func() []int64 {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(o.dataDir, "kici.db")+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query(`SELECT expires_at - created_at FROM agent_tokens WHERE agent_type = 'ephemeral' ORDER BY created_at`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var d int64
			_ = rows.Scan(&d)
			out = append(out, d)
		}
		return out
	}

	d1 := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	if r := o.waitRun(t, d1, time.Minute); r.Status != "success" {
		t.Fatalf("first run %s", r.Status)
	}
	out := o.admin(t, "cluster-settings", "set", "agentTokenTtlMs", "120000")
	if !strings.Contains(out, "120000") {
		t.Errorf("cluster-settings set printed:\n%s", out)
	}
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "again")
	d2 := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	if r := o.waitRun(t, d2, time.Minute); r.Status != "success" {
		t.Fatalf("second run %s", r.Status)
	}
	if got := tokenTTLs(); len(got) != 2 || got[0] != 3_600_000 || got[1] != 120_000 {
		t.Fatalf("token TTLs %v ms, want [3600000 120000]", got)
	}
	show := o.admin(t, "cluster-settings", "show")
	if !strings.Contains(show, "agentTokenTtlMs") || !strings.Contains(show, "120000") {
		t.Errorf("cluster-settings show:\n%s", show)
	}
	o.admin(t, "cluster-settings", "reset", "agentTokenTtlMs")
	var v struct {
		Settings  map[string]*int64 `json:"settings"`
		Effective map[string]int64  `json:"effective"`
		Version   int64             `json:"version"`
	}
	o.get(t, "/api/v1/admin/cluster-settings", &v)
	if v.Settings["agentTokenTtlMs"] != nil || v.Effective["agentTokenTtlMs"] != 3_600_000 || v.Version != 2 {
		t.Errorf("after reset: %+v", v)
	}
}

// TestScalerConfigRefusedAndSIGHUP: a scalers.yaml with an unknown key or
// an invalid label stops the orchestrator at start with file and field; a
// SIGHUP with a broken file keeps the old config, a good one applies.
func TestScalerConfigRefusedAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scalers.yaml")
	good := "version: 1\nscalers:\n  - name: metal\n    type: bare-metal\n    maxAgents: 2\n    labelSets:\n      - labels: [local]\n"
	for name, doc := range map[string]string{
		"unknown key":   strings.Replace(good, "maxAgents: 2", "maxAgents: 2\n    maxAgentz: 3", 1),
		"invalid label": strings.Replace(good, "[local]", "[\"kici:os:linux\"]", 1),
	} {
		write(t, path, doc)
		cmd := execOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+path)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%s: orchestrator started with\n%s", name, doc)
		}
		if !strings.Contains(string(out), path) || !(strings.Contains(string(out), "maxAgentz") || strings.Contains(string(out), "scalers[0].labelSets[0].labels[0]")) {
			t.Errorf("%s: error does not name file and field:\n%s", name, out)
		}
	}

	write(t, path, good)
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+path)
	write(t, path, strings.Replace(good, "maxAgents: 2", "maxAgents: 2\n    colour: red", 1))
	if err := o.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, o, "scaler config reload failed")
	var v struct {
		Reloads int `json:"reloads"`
		Scalers []struct {
			Name      string `json:"name"`
			MaxAgents int    `json:"maxAgents"`
		} `json:"scalers"`
	}
	o.get(t, "/api/v1/admin/scalers", &v)
	if v.Reloads != 0 || len(v.Scalers) != 1 || v.Scalers[0].MaxAgents != 2 {
		t.Fatalf("broken reload changed the config: %+v", v)
	}
	write(t, path, strings.Replace(good, "maxAgents: 2", "maxAgents: 3", 1))
	_ = o.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, o, "scaler config reloaded")
	o.get(t, "/api/v1/admin/scalers", &v)
	if v.Reloads != 1 || v.Scalers[0].MaxAgents != 3 {
		t.Fatalf("good reload not applied: %+v", v)
	}
	if out := o.admin(t, "scaler", "list"); !strings.Contains(out, "metal") || !strings.Contains(out, "bare-metal") {
		t.Errorf("scaler list:\n%s", out)
	}
}

func waitLog(t *testing.T, o *orchestrator, text string) {
	t.Helper()
	if !wait.Until(10*time.Second, func() bool { b, _ := os.ReadFile(o.logPath); return bytes.Contains(b, []byte(text)) }) {
		t.Fatalf("orchestrator log never said %q", text)
	}
}

// execOrchestrator prepares (does not start) an orchestrator on a fresh
// data dir, for start-up failures.
func execOrchestrator(t *testing.T, extraEnv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kici-orchestrator"))
	cmd.Env = append(cleanEnv(), append([]string{"KICI_DATA_DIR=" + t.TempDir(), "KICI_PORT=0"}, extraEnv...)...)
	time.AfterFunc(30*time.Second, func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return cmd
}

// zombie reports whether process pid has exited and awaits its reaper.
func zombie(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// TestScalerWarmPool: a warm pool of one bare-metal agent is ready before
// any job; a job runs on that warm agent without a spawn of its own, and
// the pool refills while that job still runs (so the next job finds a
// warm agent too).
func TestScalerWarmPool(t *testing.T) {
	repo := makeWorkflowRepo(t, strings.Replace(manyJobsWorkflow(1, ""), "sleep 0.3", "sleep 3", 1))
	cfgDir := t.TempDir()
	write(t, filepath.Join(cfgDir, "scalers.yaml"), `version: 1
scalers:
  - name: warm
    type: bare-metal
    maxAgents: 2
    warmPool: { enabled: true, size: 1, idleTimeoutSeconds: 60 }
    labelSets:
      - labels: [local]
`)
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+filepath.Join(cfgDir, "scalers.yaml"))
	type agentsView struct {
		Scalers []struct {
			Agents []struct {
				AgentID string `json:"agentId"`
				JobID   string `json:"jobId"`
				Warm    bool   `json:"warm"`
			} `json:"agents"`
		} `json:"scalers"`
	}
	warmAgent := func() string {
		var v agentsView
		o.get(t, "/api/v1/admin/scalers", &v)
		for _, a := range v.Scalers[0].Agents {
			if a.Warm {
				return a.AgentID
			}
		}
		return ""
	}
	var first string
	wait.Until(20*time.Second, func() bool { first = warmAgent(); return first != "" })
	if first == "" {
		t.Fatal("no warm agent appeared")
	}
	// Wait until it is registered (idle in the dispatcher's registry).
	waitLog(t, o, `msg="agent registered" component=dispatch agent=`+first)
	// ... and /metrics counts it ready at once, not at the pool's next
	// periodic check (30 s away; 10 s leaves room for a loaded machine).
	if !wait.Until(10*time.Second, func() bool {
		return strings.Contains(metricsText(t, o), `kici_orch_scaler_warm_pool_ready{scaler="warm"} 1`)
	}) {
		t.Fatal("the registered warm agent is not counted ready on /metrics within 10 s")
	}
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "warm", "--quiet")
	// While the warm agent runs the job, the scaler view (kici-admin
	// scaler list --agents, JOB column) names that job, and beside it
	// shows the pool's next warm agent.
	shown := make(chan string, 1)
	var refilledDuringJob string
	stopWatch := make(chan struct{})
	go func() {
		defer close(shown)
		job := ""
		for {
			select {
			case <-stopWatch:
				shown <- job
				return
			case <-time.After(20 * time.Millisecond):
			}
			var v agentsView
			if o.getQuiet("/api/v1/admin/scalers", &v) != nil {
				continue
			}
			busy, other := "", ""
			for _, sc := range v.Scalers {
				for _, a := range sc.Agents {
					if a.AgentID == first && a.JobID != "" {
						busy = a.JobID
					} else if a.Warm && a.AgentID != first {
						other = a.AgentID
					}
				}
			}
			if busy != "" {
				job = busy
				if other != "" {
					refilledDuringJob = other
					shown <- job
					return
				}
			}
		}
	}()
	r := o.waitRun(t, o.admin(t, "source", "trigger-local", sourceID, "--quiet"), time.Minute)
	close(stopWatch)
	shownJob := <-shown
	if refilledDuringJob == "" {
		t.Error("the pool was not refilled while its warm agent ran the job")
	}
	var jobs struct {
		Jobs []struct {
			ID      string `json:"jobId"`
			AgentID string `json:"agentId"`
			Status  string `json:"status"`
		} `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+r.RunID+"/jobs", &jobs)
	if r.Status != "success" || len(jobs.Jobs) != 1 || jobs.Jobs[0].AgentID != first {
		t.Fatalf("run %s jobs %+v, want the job on warm agent %s", r.Status, jobs.Jobs, first)
	}
	if shownJob != jobs.Jobs[0].ID {
		t.Fatalf("while warm agent %s ran job %s, the scaler view showed job %q", first, jobs.Jobs[0].ID, shownJob)
	}
	next := ""
	wait.Until(20*time.Second, func() bool { next = warmAgent(); return next != "" && next != first })
	if next == "" || next == first {
		t.Fatalf("pool not refilled (warm agent %q)", next)
	}
	if m := metricsText(t, o); !strings.Contains(m, `kici_orch_scaler_warm_pool_target{scaler="warm"} 1`) ||
		!strings.Contains(m, `kici_orch_scaler_warm_pool_spawns_total{scaler="warm"} 2`) {
		t.Errorf("/metrics lacks the warm-pool series:\n%s", m)
	}
}

// metricsText returns the orchestrator's /metrics page.
func metricsText(t *testing.T, o *orchestrator) string {
	t.Helper()
	resp, err := http.Get(o.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mb bytes.Buffer
	if _, err := mb.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return mb.String()
}
