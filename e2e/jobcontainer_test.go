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

	"github.com/moby/moby/client"

	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/testutil/wait"
)

// jobImage is the step and service image of the job-container tests, built
// here FROM scratch with a static busybox (no registry is involved).
var jobImage = fmt.Sprintf("kici-jobctr-e2e-%d:latest", os.Getpid())

func buildJobImage(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	steps := [][]string{
		{"mkdir", "-p", root + "/bin", root + "/tmp", root + "/www"},
		{"chmod", "1777", root + "/tmp"},
		{"cp", "/bin/busybox", root + "/bin/busybox"},
	}
	for _, tool := range []string{"sh", "echo", "cat", "sleep", "wget", "httpd", "test", "pwd", "touch", "env", "grep"} {
		steps = append(steps, []string{"ln", "-s", "busybox", root + "/bin/" + tool})
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", s, err, out)
		}
	}
	write(t, filepath.Join(root, "www/index.html"), "hello-from-web\n")
	write(t, filepath.Join(root, "image-marker"), "in-job-image\n")
	write(t, filepath.Join(dir, "Dockerfile"), "FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\n")
	if out, err := exec.Command("docker", "build", "-q", "-t", jobImage, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", jobImage).Run() })
}

// jobDockerObjects lists the containers and networks the agent created for
// jobID (by the labels it puts on all of them).
func jobDockerObjects(t *testing.T, cli *client.Client, jobID string) (containers, networks int) {
	t.Helper()
	f := make(client.Filters).Add("label", "kici-job-id="+jobID)
	cs, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cli.NetworkList(context.Background(), client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs.Items), len(ns.Items)
}

// removeJobDockerObjectsAtEnd removes, when the test ends, whatever a
// failing run left of jobID's containers and network.
func removeJobDockerObjectsAtEnd(t *testing.T, cli *client.Client, jobID string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = runner.RemoveJobObjects(ctx, cli, jobID)
	})
}

const jobContainerWorkflow = `name: ctr
on: {push: {branches: [main]}}
jobs:
  web:
    contexts: [ctr]
    container:
      image: IMAGE
      env: {FROM_CONTAINER: yes-container}
    services:
      web:
        image: IMAGE
        command: [httpd, -f, -p, "8080", -h, /www]
        health: {cmd: [wget, -q, -O, /dev/null, "http://127.0.0.1:8080/index.html"], interval: 200ms, retries: 50}
    steps:
      - name: reach
        shell: sh
        secrets: {TOKEN: ctr:token}
        run: |
          cat /image-marker
          test -f README.txt && echo "workspace $(pwd)"
          echo "env $FROM_CONTAINER"
          echo "token $TOKEN"
          wget -q -O - http://web:8080/index.html
          echo carried > carried.txt
          test -d "$HOME" && echo "home $HOME"
      - name: next
        shell: sh
        run: cat carried.txt
      - name: slow
        shell: sh
        timeout: 1s
        continueOnError: true
        run: sleep 60
`

const jobContainerCancelWorkflow = `name: ctrcancel
on: {push: {branches: [main]}}
jobs:
  hang:
    gracePeriod: 1s
    container: IMAGE
    services:
      web:
        image: IMAGE
        command: [httpd, -f, -p, "8080", -h, /www]
    steps:
      - name: wait
        shell: sh
        run: |
          trap '' TERM
          echo looping
          while true; do sleep 0.2; done
`

// TestJobContainerWithServiceAndCancel: a job runs in a locally built image
// with its workspace mounted, reaches a health-checked service container by
// name, keeps masking its secret, and leaves no container or network; a
// cancelled job in a container with a service is SIGKILLed after its grace
// and its containers and network are removed too.
func TestJobContainerWithServiceAndCancel(t *testing.T) {
	cli := dockerClient(t)
	buildJobImage(t)
	const secret = "s3cr3t-ctr-token-value"
	o := startOrchestrator(t, "KICI_SECRET_KEY="+strings.Repeat("c3", 32))
	o.admin(t, "context", "create", "--org", "acme", "--name", "ctr")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "ctr", "--scope", "ctr")
	o.adminIn(t, secret+"\n", "secret", "set", "--org", "acme", "ctr", "token", "--from-stdin")

	repo := repoWithWorkflow(t, strings.ReplaceAll(jobContainerWorkflow, "IMAGE", jobImage))
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["web"]
	removeJobDockerObjectsAtEnd(t, cli, job.JobID)
	log0 := o.logText(t, runID, job.JobID, 0)
	if r.Status != "success" {
		t.Fatalf("run %s (%s); job %s: %s\n%s\njob log:\n%s", r.Status, r.FailureReason, job.Status, job.ErrorMessage, log0, o.logText(t, runID, job.JobID, -1))
	}
	for _, want := range []string{"in-job-image", "workspace /", "env yes-container", "hello-from-web", "/home\n"} {
		if !strings.Contains(log0, want) {
			t.Errorf("step log lacks %q:\n%s", want, log0)
		}
	}
	if strings.Contains(log0, secret) || !strings.Contains(log0, "token ") {
		t.Errorf("secret not masked in the container step's log:\n%s", log0)
	}
	if log1 := o.logText(t, runID, job.JobID, 1); !strings.Contains(log1, "carried") {
		t.Errorf("second step did not see the first one's workspace file:\n%s", log1)
	}
	if len(job.Steps) != 3 || job.Steps[2].Status != "failed" {
		t.Errorf("steps %+v, want the slow step failed by its timeout", job.Steps)
	} else if log2 := o.logText(t, runID, job.JobID, 2); !strings.Contains(log2, "timed out after 1s") {
		t.Errorf("slow step log lacks the timeout:\n%s", log2)
	}
	if c, n := jobDockerObjects(t, cli, job.JobID); c != 0 || n != 0 {
		t.Errorf("after success: %d containers and %d networks left", c, n)
	}

	repo2 := repoWithWorkflow(t, strings.ReplaceAll(jobContainerCancelWorkflow, "IMAGE", jobImage))
	_, delivery = o.push(t, repo2, "")
	runID = o.runOf(t, delivery)
	var jobID string
	wait.For(t, 2*time.Minute, "the service and the step container", func() bool {
		if jobID == "" {
			jobID = o.jobsOf(t, runID)["hang"].JobID
			if jobID == "" {
				return false
			}
			removeJobDockerObjectsAtEnd(t, cli, jobID)
		}
		c, n := jobDockerObjects(t, cli, jobID)
		return c == 2 && n == 1
	})
	wait.For(t, time.Minute, "the step to be inside its loop", func() bool { // its TERM trap set
		return strings.Contains(o.logText(t, runID, jobID, 0), "looping")
	})
	o.admin(t, "runs", "cancel", runID)
	r = o.waitRunStatus(t, runID, time.Minute, "cancelled", "failed", "success")
	if r.Status != "cancelled" {
		t.Fatalf("cancelled run ended %s (%s)", r.Status, r.FailureReason)
	}
	if st := o.jobsOf(t, runID)["hang"]; st.Status != "cancelled" || len(st.Steps) != 1 || st.Steps[0].Status != "cancelled" {
		t.Errorf("job %s steps %+v, want cancelled", st.Status, st.Steps)
	}
	if c, n := jobDockerObjects(t, cli, jobID); c != 0 || n != 0 {
		t.Errorf("after cancel: %d containers and %d networks left", c, n)
	}
}

// TestJobContainersRemovedWhenAgentKilled: a SIGKILLed agent runs no
// cleanup of its own, yet its container job's service, step container and
// network are removed (by the job's reaper, which the agent's death wakes).
func TestJobContainersRemovedWhenAgentKilled(t *testing.T) {
	cli := dockerClient(t)
	buildJobImage(t)
	o := startOrchestrator(t)
	repo := repoWithWorkflow(t, strings.ReplaceAll(jobContainerCancelWorkflow, "IMAGE", jobImage))
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	var jobID string
	wait.For(t, 2*time.Minute, "the service and the step container", func() bool {
		if jobID == "" {
			if jobID = o.jobsOf(t, runID)["hang"].JobID; jobID == "" {
				return false
			}
			removeJobDockerObjectsAtEnd(t, cli, jobID)
		}
		c, n := jobDockerObjects(t, cli, jobID)
		return c == 2 && n == 1
	})
	agents := o.agentPIDs()
	if len(agents) != 1 {
		t.Fatalf("agent processes = %v, want exactly 1", agents)
	}
	if err := syscall.Kill(agents[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 90*time.Second, "the job's containers and network to be removed", func() bool {
		c, n := jobDockerObjects(t, cli, jobID)
		return c == 0 && n == 0
	})
}
