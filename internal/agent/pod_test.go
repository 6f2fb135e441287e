package agent

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// An agent as the kubernetes scaler starts it in a job pod: the token read
// from a Secret file, KICI_AGENT_JOB_CONTAINER=pod, no Docker Engine. It
// authenticates with the file's token, runs the container job's step as a
// process with the container's env after its service (a TCP listener on
// 127.0.0.1 standing in for the sibling container) accepts connections,
// and the token reaches neither the step nor the log.
func TestAgentInPodWithTokenFile(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	const token = "kat_pod_secret_0123456789"
	srv := agenttest.NewServer(t, agenttest.Options{Token: token})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	cfg, err := LoadConfig([]string{
		"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_AGENT_ID=pod-agent", "KICI_WORK_DIR=" + t.TempDir(),
		"KICI_AGENT_TOKEN_FILE=" + tokenFile, EnvJobContainer + "=pod", "KICI_SCALER_MANAGED=true",
	})
	if err != nil {
		t.Fatal(err)
	}
	a := New(cfg, slog.New(slog.DiscardHandler), Options{
		HostEnv: append(os.Environ(), "KICI_AGENT_TOKEN_FILE="+tokenFile),
		Backoff: func(int) time.Duration { return 50 * time.Millisecond },
	})
	defer runUntilTestEnds(t, a)()
	srv.WaitRegistrations(t, 1, 10*time.Second)
	if srv.AuthFailures() != 0 {
		t.Fatalf("the token from the file was refused")
	}

	no := false
	srv.Dispatch(t, &protocol.JobDispatch{RunID: "run-1", JobID: "job-1", JobName: "test", WorkflowName: "ci"}, lockfile.Job{
		Type: lockfile.JobStatic, Name: "test", Checkout: &no,
		Container: &lockfile.Container{Image: "golang:1", Env: map[string]string{"CTR_VAR": "in-the-pod"}},
		Services: []lockfile.Service{{Name: "db", Image: "postgres:16", Ports: []int{port},
			Health: &lockfile.HealthCheck{Cmd: []string{"pg_isready"}, Interval: 50, Retries: 40}}},
		Steps: []lockfile.Step{{Name: "s", Run: `echo "ctr=$CTR_VAR file=${KICI_AGENT_TOKEN_FILE:-unset}"; echo "read=$(cat "` + tokenFile + `")"`}},
	})
	js, _ := srv.WaitJobTerminal(t, "job-1", 30*time.Second)
	if js.State != status.JobSuccess {
		t.Fatalf("job: %+v %+v\nsetup log:\n%s", js, js.Data, srv.LogText("job-1", -1))
	}
	if setup := srv.LogText("job-1", -1); !strings.Contains(setup, "service db ready") {
		t.Errorf("setup log lacks the service wait:\n%s", setup)
	}
	step := srv.LogText("job-1", 0)
	if !strings.Contains(step, "ctr=in-the-pod file=unset") {
		t.Errorf("step log: %s", step)
	}
	// The step may read the file (it runs as the agent's user, the pod is
	// its sandbox), but the log masks the agent's own credential.
	if strings.Contains(step, token) || !strings.Contains(step, "read=***") {
		t.Errorf("the token was not masked in the log: %s", step)
	}
}

// As root in a job pod (a job image whose user is root), the agent gives
// the job's steps a uid of their own, taking it with lock files in its work
// root rather than /run, which the image may not let it write: the steps
// run as that uid and cannot read the token file, which stays root's.
func TestRootAgentInPodStepsCannotReadToken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root agent runs steps as another uid")
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	const token = "kat_root_pod_secret_42"
	srv := agenttest.NewServer(t, agenttest.Options{Token: token})
	// Directories a step user may traverse, as a pod's volumes are.
	base, err := os.MkdirTemp("", "kici-pod-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	work, tokenDir := filepath.Join(base, "work"), filepath.Join(base, "token")
	for _, d := range []string{base, work, tokenDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	tokenFile := filepath.Join(tokenDir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o440); err != nil {
		t.Fatal(err)
	}
	env := []string{"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_AGENT_ID=root-pod-agent", "KICI_WORK_DIR=" + work,
		"KICI_AGENT_TOKEN_FILE=" + tokenFile, EnvJobContainer + "=pod", EnvStepUIDRange + "=271000-271099"}
	cfg, err := LoadConfig(env)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := ResolveConfinement(env, 0)
	if err != nil || conf.UIDs == nil {
		t.Fatalf("confinement %+v %v", conf, err)
	}
	a := New(cfg, slog.New(slog.DiscardHandler), Options{HostEnv: os.Environ(), Confinement: conf,
		Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	defer runUntilTestEnds(t, a)()
	srv.WaitRegistrations(t, 1, 10*time.Second)
	no := false
	srv.Dispatch(t, &protocol.JobDispatch{RunID: "run-1", JobID: "job-1", JobName: "test", WorkflowName: "ci"}, lockfile.Job{
		Type: lockfile.JobStatic, Name: "test", Checkout: &no,
		Container: &lockfile.Container{Image: "debian:13"},
		Steps:     []lockfile.Step{{Name: "s", Run: `echo "uid=$(id -u)"; if cat "` + tokenFile + `" >/dev/null 2>&1; then echo token=readable; else echo token=denied; fi; ls "` + work + `/.kici-step-uids" >/dev/null 2>&1 || echo lockdir=denied`}},
	})
	js, _ := srv.WaitJobTerminal(t, "job-1", 30*time.Second)
	step := srv.LogText("job-1", 0)
	if js.State != status.JobSuccess {
		t.Fatalf("job: %+v %+v\nsetup log:\n%s\nstep log:\n%s", js, js.Data, srv.LogText("job-1", -1), step)
	}
	if !strings.Contains(step, "uid=2710") || !strings.Contains(step, "token=denied") {
		t.Errorf("step log: %s", step)
	}
	// The lock directory is the agent's (0700): the step cannot list it.
	if !strings.Contains(step, "lockdir=denied") {
		t.Errorf("the step listed the uid lock directory: %s", step)
	}
	if ents, err := os.ReadDir(filepath.Join(work, ".kici-step-uids")); err != nil || len(ents) == 0 {
		t.Errorf("uid lock files not in the work root: %v %v", ents, err)
	}
}

// runUntilTestEnds runs a in the background; the returned func cancels it
// and waits (at most 30 s) for it to stop.
func runUntilTestEnds(t *testing.T, a *Agent) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop")
		}
	}
}
