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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop")
		}
	}()
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
