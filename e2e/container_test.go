package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"kici.dev/kici/internal/testutil/wait"
)

// The container tests run against the machine's Docker Engine with an
// agent image built here once per test process: FROM scratch, the static
// kici-agent and a static busybox for sh (no registry is involved).
const agentImage = "kici-agent-e2e:latest"

var (
	imageOnce sync.Once
	imageErr  error
)

func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		t.Fatalf("the container tests need a Docker Engine: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// buildAgentImage builds agentImage from binDir/kici-agent and
// /bin/busybox (Debian busybox-static, installed by scripts/test-deps.sh).
func buildAgentImage(t *testing.T) {
	t.Helper()
	imageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kici-agent-image")
		if err != nil {
			imageErr = err
			return
		}
		defer os.RemoveAll(dir)
		root := filepath.Join(dir, "rootfs")
		steps := [][]string{
			{"mkdir", "-p", root + "/bin", root + "/tmp", root + "/work"},
			{"chmod", "1777", root + "/tmp", root + "/work"},
			{"cp", filepath.Join(binDir, "kici-agent"), root + "/kici-agent"},
			{"cp", "/bin/busybox", root + "/bin/busybox"},
		}
		for _, tool := range []string{"sh", "echo", "cat", "sleep", "hostname", "env", "ls"} {
			steps = append(steps, []string{"ln", "-s", "busybox", root + "/bin/" + tool})
		}
		for _, s := range steps {
			if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
				imageErr = fmt.Errorf("%v: %v\n%s", s, err, out)
				return
			}
		}
		df := "FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\nENTRYPOINT [\"/kici-agent\"]\n"
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
			imageErr = err
			return
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", agentImage, dir).CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("docker build: %v\n%s", err, out)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
}

// scalerContainers lists the containers labelled with scaler name.
func scalerContainers(t *testing.T, cli *client.Client, name string) []string {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "kici-scaler-name="+name)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// containerScalerName builds the agent image and returns a Docker client
// and a container scaler name of this test process (prefix-<pid>) whose
// containers are removed at the end of the test.
func containerScalerName(t *testing.T, prefix string) (*client.Client, string) {
	t.Helper()
	cli := dockerClient(t)
	buildAgentImage(t)
	name := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	t.Cleanup(func() {
		for _, id := range scalerContainers(t, cli, name) {
			_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
	})
	return cli, name
}

func containerScalerConfig(t *testing.T, name, extra string) string {
	dir := t.TempDir()
	p := filepath.Join(dir, "scalers.yaml")
	write(t, p, `version: 1
scalers:
  - name: `+name+`
    type: container
    maxAgents: 2
    maxConcurrentSpawns: 2
    labelSets:
      - labels: [ctr]
        image: `+agentImage+`
        imagePullPolicy: Never
        resources: { memory: 64m, cpus: 0.5 }
`+extra)
	return p
}

// TestScalerContainerBackend: jobs run in agent containers on
// kici-agent-net (the orchestrator listens on the bridge gateway), the
// containers carry the labels and the memory/pids limits, never more than
// maxAgents exist, all are removed at the end; a container left by a
// killed orchestrator is removed at the next start.
func TestScalerContainerBackend(t *testing.T) {
	cli, name := containerScalerName(t, "e2e")
	repo := makeWorkflowRepo(t, strings.Replace(manyJobsWorkflow(4, "    runsOn: ctr\n    checkout: false\n"), "sleep 0.3", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes\n          sleep 1", 1))
	cfg := containerScalerConfig(t, name, "")
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_HOST=172.30.0.1")
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "ctr", "--quiet")

	var mu sync.Mutex
	maxSeen := 0
	inspected := map[string]bool{}
	var problems []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
				Filters: make(client.Filters).Add("label", "kici-scaler-name="+name)})
			if err == nil {
				mu.Lock()
				maxSeen = max(maxSeen, len(res.Items))
				for _, c := range res.Items {
					if inspected[c.ID] {
						continue
					}
					inspected[c.ID] = true
					in, err := cli.ContainerInspect(context.Background(), c.ID, client.ContainerInspectOptions{})
					if err != nil {
						continue // removed meanwhile
					}
					hc := in.Container.HostConfig
					l := in.Container.Config.Labels
					if l["kici-managed"] != "true" || l["kici-agent-id"] == "" || !strings.HasPrefix(l["kici-agent-id"], "scaler-container-") || l["kici-bound-job-id"] == "" ||
						hc.Memory != 64<<20 || hc.NanoCPUs != 5e8 || hc.PidsLimit == nil || *hc.PidsLimit != 4096 || string(hc.NetworkMode) != "kici-agent-net" {
						problems = append(problems, fmt.Sprintf("container %.12s labels %v memory %d cpus %d network %s", c.ID, l, hc.Memory, hc.NanoCPUs, hc.NetworkMode))
					}
					// The agent's token reaches it on standard input, not in
					// the container's environment (which steps could read).
					for _, kv := range in.Container.Config.Env {
						if strings.HasPrefix(kv, "KICI_AGENT_TOKEN=") || strings.Contains(kv, "kat_") {
							problems = append(problems, fmt.Sprintf("container %.12s has the agent token in its environment", c.ID))
						}
					}
				}
				mu.Unlock()
			}
			select { // sample every 50 ms until stopped
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	r := o.waitRun(t, delivery, 2*time.Minute)
	close(stop)
	<-done
	var jobs struct {
		Jobs []jobView `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+r.RunID+"/jobs", &jobs)
	if r.Status != "success" || len(jobs.Jobs) != 4 {
		t.Fatalf("run %s with %d jobs", r.Status, len(jobs.Jobs))
	}
	// The job saw the memory limit from inside its container.
	if log := o.logText(t, r.RunID, jobs.Jobs[0].JobID, 0); !strings.Contains(log, "67108864") || !strings.Contains(log, "on scaler-container-") {
		t.Errorf("job log lacks the container's memory limit / hostname:\n%s", log)
	}
	mu.Lock()
	t.Logf("containers seen: %d, at most %d at once", len(inspected), maxSeen)
	if len(inspected) != 4 || maxSeen > 2 || maxSeen == 0 {
		t.Errorf("saw %d containers, at most %d at once; want 4, ≤ 2", len(inspected), maxSeen)
	}
	for _, p := range problems {
		t.Error(p)
	}
	mu.Unlock()
	wait.Until(20*time.Second, func() bool { return len(scalerContainers(t, cli, name)) == 0 })
	if left := scalerContainers(t, cli, name); len(left) > 0 {
		t.Errorf("containers remain after the run: %v", left)
	}

	// Measured: the mean backend spawn (create + start) latency.
	if resp, err := http.Get(o.url + "/metrics"); err == nil {
		var sum, count float64
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "kici_orch_scaler_spawn_duration_seconds_sum{") && strings.Contains(line, name) {
				if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &sum); err != nil {
					t.Fatal(err)
				}
			}
			if strings.HasPrefix(line, "kici_orch_scaler_spawn_duration_seconds_count{") && strings.Contains(line, name) {
				if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &count); err != nil {
					t.Fatal(err)
				}
			}
		}
		if count > 0 {
			t.Logf("container spawn (create+start) mean %.0f ms over %.0f spawns", 1000*sum/count, count)
		}
	}

	// A reload sweeps containers of this scaler that it does not track.
	orphan, err := cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{
		Config: &container.Config{Image: agentImage, Labels: map[string]string{
			"kici-managed": "true", "kici-scaler-name": name, "kici-agent-id": "scaler-container-deadbeef"}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = o.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, o, "orphans removed on reload")
	if _, err := cli.ContainerInspect(context.Background(), orphan.ID, client.ContainerInspectOptions{}); err == nil {
		t.Error("untracked container survived the reload")
	}

	// A killed orchestrator leaves its running agent container behind; the
	// next start removes it.
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "again")
	write(t, filepath.Join(repo, ".kici/workflows/many.yaml"), strings.Replace(manyJobsWorkflow(1, "    runsOn: ctr\n    checkout: false\n"), "sleep 0.3", "sleep 120", 1))
	run(t, repo, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "long")
	o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	wait.Until(30*time.Second, func() bool { return len(scalerContainers(t, cli, name)) > 0 })
	if len(scalerContainers(t, cli, name)) != 1 {
		t.Fatal("the long job's container never appeared")
	}
	_ = o.cmd.Process.Signal(syscall.SIGKILL)
	_ = o.cmd.Wait()
	wait.Elapse(t.Context(), 200*time.Millisecond) // room for a removal that must not come
	if len(scalerContainers(t, cli, name)) != 1 {
		t.Fatal("the container did not outlive the killed orchestrator (nothing to clean up)")
	}
	o2 := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_HOST=172.30.0.1")
	if left := scalerContainers(t, cli, name); len(left) != 0 {
		t.Errorf("orphaned container not removed at start: %v", left)
	}
	waitLog(t, o2, "removed orphaned agent container")
}

// TestScalerSpawnDeadline: a spawn that hangs (an image pull from a local
// registry endpoint that accepts connections and never answers) is aborted
// at the spawn deadline, its reservation is released, and the job's
// pending reason shows the failure.
func TestScalerSpawnDeadline(t *testing.T) {
	cli := dockerClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var cmu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cmu.Lock()
			conns = append(conns, c) // held open, never answered
			cmu.Unlock()
		}
	}()
	defer func() {
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	}()
	name := fmt.Sprintf("e2e-hang-%d", os.Getpid())
	t.Cleanup(func() {
		for _, id := range scalerContainers(t, cli, name) {
			_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
	})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "scalers.yaml")
	write(t, cfg, `version: 1
scalers:
  - name: `+name+`
    type: container
    maxAgents: 1
    # no agent ever starts; the URL only has to be one a container can dial
    orchestratorUrl: ws://`+"172.30.0.1"+`:9/ws
    labelSets:
      - labels: [ctr]
        image: `+ln.Addr().String()+`/kici/agent:hang
        imagePullPolicy: Always
`)
	repo := makeWorkflowRepo(t, manyJobsWorkflow(1, "    runsOn: ctr\n    checkout: false\n"))
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_SCALER_SPAWN_TIMEOUT_MS=2000")
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "hang", "--quiet")
	start := time.Now()
	o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	var reason string
	wait.Until(30*time.Second, func() bool {
		var runs struct {
			Runs []runView `json:"runs"`
		}
		o.get(t, "/api/v1/admin/runs", &runs)
		if len(runs.Runs) != 1 {
			return false
		}
		var jobs struct {
			Jobs []struct {
				PendingReason string `json:"routingReason"`
			} `json:"jobs"`
		}
		o.get(t, "/api/v1/admin/runs/"+runs.Runs[0].RunID+"/jobs", &jobs)
		if len(jobs.Jobs) == 1 && strings.Contains(jobs.Jobs[0].PendingReason, "spawn failed") {
			reason = jobs.Jobs[0].PendingReason
			return true
		}
		return false
	})
	took := time.Since(start)
	t.Logf("pending reason after %v: %s", took.Round(time.Millisecond), reason)
	if !strings.Contains(reason, "spawn deadline of 2s exceeded") {
		t.Fatalf("pending reason %q, want the spawn deadline failure", reason)
	}
	if took < 2*time.Second || took > 15*time.Second {
		t.Errorf("failure shown after %v, want soon after the 2 s deadline", took)
	}
	var v scalerView
	o.get(t, "/api/v1/admin/scalers", &v)
	if v.Active != 0 || v.Scalers[0].Spawning != 0 || v.Scalers[0].FailedTotal < 1 {
		t.Errorf("reservation not released: %+v", v)
	}
	if left := scalerContainers(t, cli, name); len(left) != 0 {
		t.Errorf("containers left by the failed spawn: %v", left)
	}
}
