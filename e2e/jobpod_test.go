package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// jobPodWorkflow is a container job with a service, run by an agent that
// lives in the job's own container as in a Kubernetes job pod.
const jobPodWorkflow = `name: podsim
on: {push: {branches: [main]}}
jobs:
  test:
    runsOn: LABEL
    checkout: false
    container:
      image: IMAGE
      env: {CTR_VAR: from-the-lock}
      options: ["--memory=1g"]
    services:
      web:
        image: IMAGE
        ports: [PORT]
        health: {cmd: [wget, -q, -O, /dev/null, "http://127.0.0.1:PORT/index.html"], interval: 200ms, retries: 150}
    steps:
      - name: probe
        run: |
          echo "ctr=$CTR_VAR marker=$(cat /image-marker)"
          grep '^Uid:' /proc/self/status
          wget -q -O - http://127.0.0.1:PORT/index.html
          if cat /run/kici/token >/dev/null 2>&1; then echo token=readable; else echo token=denied; fi
`

// A job pod as the kubernetes scaler builds it, played with Docker and the
// real binaries: the job's image (a static busybox, no bash, no Docker
// client) runs the static kici-agent from /kici/bin with
// KICI_AGENT_JOB_CONTAINER=pod, its token in a read-only file, and the job's
// service is another container on the same network namespace, started
// only after the job was dispatched. The agent waits for the service's
// port, runs the step as a process of the job's container (as a uid of the
// job's own, which cannot read the token), with the lock's container env;
// the docker options are said to be ignored.
func TestJobContainerAsPodWithDocker(t *testing.T) {
	dockerClient(t)
	buildJobImage(t)
	dataDir, port := t.TempDir(), freePort(t)
	o := startOrchestratorAt(t, dataDir, port)
	tok := mintStaticToken(t, dataDir)
	tokenDir := t.TempDir()
	tokenFile := filepath.Join(tokenDir, "token")
	if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	label := fmt.Sprintf("podsim-%d", os.Getpid())
	svcPort := freePort(t)
	wf := strings.NewReplacer("LABEL", label, "IMAGE", jobImage, "PORT", strconv.Itoa(svcPort)).Replace(jobPodWorkflow)
	repo := repoWithWorkflow(t, wf)

	// Both containers use the host's network namespace, as a pod's share
	// one: the orchestrator is on its loopback, and so is the service.
	agentName, svcName := "kici-podsim-agent-"+strconv.Itoa(os.Getpid()), "kici-podsim-web-"+strconv.Itoa(os.Getpid())
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", agentName, svcName).Run() })
	dockerRun(t, "run", "-d", "--name", agentName, "--network", "host",
		"-v", filepath.Join(binDir, "kici-agent")+":/kici/bin/kici-agent:ro",
		"-v", tokenFile+":/run/kici/token:ro",
		"-e", fmt.Sprintf("KICI_ORCHESTRATOR_URL=ws://127.0.0.1:%d/ws", port),
		"-e", "KICI_AGENT_ID="+agentName, "-e", "KICI_LABELS="+label,
		"-e", "KICI_AGENT_TOKEN_FILE=/run/kici/token", "-e", "KICI_AGENT_JOB_CONTAINER=pod",
		"-e", "KICI_WORK_DIR=/tmp/kici-work", "-e", "KICI_ALLOW_UNCONFINED_STEPS=true",
		"-e", "KICI_STEP_UID_RANGE=270000-270099",
		jobImage, "/kici/bin/kici-agent")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", agentName).CombinedOutput()
			t.Logf("agent container log:\n%s", out)
		}
	})

	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	// The agent took the job and is waiting for a service that is not
	// there yet; the sidecar starts now.
	wait.For(t, time.Minute, "the agent in the pod to take the job", func() bool {
		j, ok := o.jobsOf(t, runID)["test"]
		return ok && j.JobID != "" && strings.Contains(o.logText(t, runID, j.JobID, -1), "Container options ignored in a Kubernetes pod")
	})
	dockerRun(t, "run", "-d", "--name", svcName, "--network", "host", jobImage,
		"sh", "-c", "exec httpd -f -p 127.0.0.1:"+strconv.Itoa(svcPort)+" -h /www")

	r := o.waitRunStatus(t, runID, 2*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["test"]
	jobLog := o.logText(t, runID, job.JobID, -1)
	stepLog := o.logText(t, runID, job.JobID, 0)
	if r.Status != "success" {
		t.Fatalf("run %s (%s %q)\njob log:\n%s\nstep log:\n%s", r.Status, job.Status, job.ErrorMessage, jobLog, stepLog)
	}
	for _, want := range []string{"Job container: this Kubernetes pod (" + jobImage + ")", "service web ready"} {
		if !strings.Contains(jobLog, want) {
			t.Errorf("job log lacks %q:\n%s", want, jobLog)
		}
	}
	for _, want := range []string{"ctr=from-the-lock marker=in-job-image", "Uid:\t2700", "hello-from-web", "token=denied"} {
		if !strings.Contains(stepLog, want) {
			t.Errorf("step log lacks %q:\n%s", want, stepLog)
		}
	}
	if strings.Contains(stepLog+jobLog, tok) {
		t.Error("the agent token is in the job's log")
	}
}

// dockerRun runs the docker CLI and fails the test with its output.
func dockerRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
