package runner

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// runPodJob runs job as an agent inside its Kubernetes pod would
// (Options.InPod), with no Docker Engine reachable, so a step that ran
// anywhere but here as a process would fail the job.
func runPodJob(t *testing.T, job lockfile.Job) (*Result, *recorder) {
	t.Helper()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	no := false
	job.Type, job.Name, job.Checkout = lockfile.JobStatic, "build", &no
	cfg, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	host := append(os.Environ(), "LANG=C.UTF-8")
	rec := &recorder{}
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: host, InPod: true}, rec)
	return r.Run(context.Background(), &protocol.JobDispatch{RunID: "r1", JobID: "j1", JobName: "build", JobConfig: cfg}), rec
}

// jobLogLines is the text of the job-level log (setup, services).
func jobLogLines(rec *recorder) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, m := range rec.msgs {
		if lc, ok := m.(*protocol.LogChunk); ok && lc.StepIndex == JobLogStep {
			for _, l := range lc.Lines {
				out = append(out, l.Text)
			}
		}
	}
	return out
}

func hasLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// listen starts a TCP listener on 127.0.0.1 that accepts and closes
// connections, as a service container of the pod would, and returns its
// port.
func listen(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// closedPort returns a port of 127.0.0.1 nothing listens on (one that was
// just free).
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p
}

// In a pod, a job with `container:` and a service runs its step as a
// process of the agent's own container: with the container's env (which
// wins over what the agent's environment passed on, not over the job's),
// the service waited for on 127.0.0.1 and logged ready, the docker options
// said to be ignored, and no Docker Engine needed.
func TestPodJobRunsStepsAsProcessesAndWaitsForServices(t *testing.T) {
	port := listen(t)
	out := filepath.Join(t.TempDir(), "seen")
	res, rec := runPodJob(t, lockfile.Job{
		Container: &lockfile.Container{Image: "golang:1", Options: []string{"--memory=2g"},
			Env: map[string]string{"CTR_VAR": "from-container", "LANG": "en_GB.UTF-8", "JOB_VAR": "container-loses"}},
		Services: []lockfile.Service{{Name: "db", Image: "postgres:16", Ports: []int{port},
			Health: &lockfile.HealthCheck{Cmd: []string{"pg_isready"}, Interval: 50, Retries: 20}}},
		Env: map[string]string{"JOB_VAR": "from-job"},
		Steps: []lockfile.Step{{Name: "s",
			Run: `echo "ctr=$CTR_VAR lang=$LANG job=$JOB_VAR" > ` + out + `; echo > /dev/tcp/127.0.0.1/` + itoa(port)}},
	})
	if res.State != status.JobSuccess {
		t.Fatalf("result = %s %q, log %q", res.State, res.Error, jobLogLines(rec))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the step did not run here as a process: %v", err)
	}
	if got := strings.TrimSpace(string(b)); got != "ctr=from-container lang=en_GB.UTF-8 job=from-job" {
		t.Errorf("step env: %q", got)
	}
	lines := jobLogLines(rec)
	for _, want := range []string{
		"Job container: this Kubernetes pod (golang:1)",
		"Container options ignored in a Kubernetes pod",
		"Service db: its health command does not run in a Kubernetes pod",
		"service db ready",
	} {
		if !hasLine(lines, want) {
			t.Errorf("job log lacks %q: %q", want, lines)
		}
	}
}

// A service whose port never accepts connections fails the job before its
// first step, with the service and port in the reason, within the bound
// its health settings give (interval × retries).
func TestPodJobServiceNeverListeningFailsWithinBound(t *testing.T) {
	port := closedPort(t)
	marker := filepath.Join(t.TempDir(), "ran")
	start := time.Now()
	res, rec := runPodJob(t, lockfile.Job{
		Container: &lockfile.Container{Image: "golang:1"},
		Services: []lockfile.Service{{Name: "db", Image: "postgres:16", Ports: []int{port},
			Health: &lockfile.HealthCheck{Cmd: []string{"true"}, Interval: 100, Retries: 5}}},
		Steps: []lockfile.Step{{Name: "s", Run: "touch " + marker}},
	})
	took := time.Since(start)
	if res.State != status.JobFailed || !strings.Contains(res.Error, `service "db"`) ||
		!strings.Contains(res.Error, "port "+itoa(port)+" on 127.0.0.1 did not accept connections after 5 tries") {
		t.Fatalf("result = %s %q", res.State, res.Error)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the step ran although its service never became ready")
	}
	// 5 tries 100 ms apart: 400 ms of waiting, plus the job's own setup.
	if took < 400*time.Millisecond || took > 10*time.Second {
		t.Errorf("gave up after %s, want about 400ms", took)
	}
	if hasLine(jobLogLines(rec), "service db ready") {
		t.Error("a service that never listened was logged ready")
	}
}

// What a pod cannot do is refused with the reason: services without a job
// container (the scaler puts them in the pod only with one) and an image
// built from the repository (the pod's image is fixed before the job).
func TestPodJobRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		job  lockfile.Job
		want string
	}{
		"services alone": {lockfile.Job{Services: []lockfile.Service{{Name: "db", Image: "x", Ports: []int{1}}}}, "services need a job container"},
		"built image": {lockfile.Job{Container: &lockfile.Container{Build: &lockfile.ContainerBuild{Context: "."}}},
			"cannot run in a Kubernetes pod"},
	} {
		marker := filepath.Join(t.TempDir(), "ran")
		tc.job.Steps = []lockfile.Step{{Name: "s", Run: "touch " + marker}}
		res, _ := runPodJob(t, tc.job)
		if res.State != status.JobFailed || !strings.Contains(res.Error, tc.want) {
			t.Errorf("%s: result = %s %q, want %q", name, res.State, res.Error, tc.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s: the step ran", name)
		}
	}
}

// A job without `container:` in a pod is a plain bare-metal job.
func TestPodJobWithoutContainer(t *testing.T) {
	res, rec := runPodJob(t, lockfile.Job{Steps: []lockfile.Step{{Name: "s", Run: "true"}}})
	if res.State != status.JobSuccess {
		t.Fatalf("result = %s %q", res.State, res.Error)
	}
	if hasLine(jobLogLines(rec), "Job container:") {
		t.Error("a job without container: was logged as one")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// In a pod whose image has no bash, a container step without `shell:`
// runs with sh, as in a Docker job container (ContainerDefaultArgv).
func TestPodJobImageWithoutBash(t *testing.T) {
	sh := "/bin/dash"
	if _, err := os.Stat(sh); err != nil {
		sh = "/bin/busybox"
	}
	bin := t.TempDir() // the image's PATH: a POSIX shell and nothing else
	if err := os.Symlink(sh, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "shell")
	no := false
	cfg, err := json.Marshal(lockfile.Job{Type: lockfile.JobStatic, Name: "b", Checkout: &no,
		Container: &lockfile.Container{Image: "alpine:3"},
		Steps:     []lockfile.Step{{Name: "s", Run: `echo "bash=${BASH_VERSION:-none}" > ` + out}}})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: []string{"PATH=" + bin}, InPod: true}, &recorder{})
	res := r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "j", JobConfig: cfg})
	if res.State != status.JobSuccess {
		t.Fatalf("result = %s %q", res.State, res.Error)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "bash=none" {
		t.Errorf("step ran with %q, want sh", b)
	}
}
