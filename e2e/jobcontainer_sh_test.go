package e2e

import (
	"strings"
	"testing"
	"time"
)

// jobContainerShWorkflow: steps without `shell:` in an image that has only
// a static busybox (sh, no bash), beside a service that prints to stdout
// and stderr; and a job whose service never becomes healthy.
const jobContainerShWorkflow = `name: ctrsh
on: {push: {branches: [main]}}
jobs:
  plain:
    container: IMAGE
    services:
      web:
        image: IMAGE
        command: [sh, -c, "echo service-says-hello; echo service-to-stderr >&2; exec httpd -f -p 8080 -h /www"]
        health: {cmd: [wget, -q, -O, /dev/null, "http://127.0.0.1:8080/index.html"], interval: 200ms, retries: 50}
    steps:
      - name: hi
        run: echo hi
      - name: strict
        run: |
          false
          echo "not reached"
        continueOnError: true
  sick:
    container: IMAGE
    services:
      db:
        image: IMAGE
        command: [sh, -c, "echo db-cannot-start-missing-config >&2; sleep 60"]
        health: {cmd: [test, -f, /ready], interval: 100ms, retries: 3}
    steps:
      - run: echo never
`

// A job container whose image has no bash runs steps without `shell:`
// with sh (and -e still stops a script at its first failing command);
// the services' output is in the job log, at the job's end and when a
// service never becomes healthy.
func TestJobContainerShellFallbackAndServiceLogs(t *testing.T) {
	cli := dockerClient(t)
	buildJobImage(t)
	o := startOrchestrator(t)
	repo := repoWithWorkflow(t, strings.ReplaceAll(jobContainerShWorkflow, "IMAGE", jobImage))
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	jobs := o.jobsOf(t, runID)
	plain, sick := jobs["plain"], jobs["sick"]
	removeJobDockerObjectsAtEnd(t, cli, plain.JobID)
	removeJobDockerObjectsAtEnd(t, cli, sick.JobID)

	log0 := o.logText(t, runID, plain.JobID, 0)
	if plain.Status != "success" || !strings.Contains(log0, "hi") {
		t.Fatalf("plain job %s %q; step log:\n%s\njob log:\n%s", plain.Status, plain.ErrorMessage, log0, o.logText(t, runID, plain.JobID, -1))
	}
	if len(plain.Steps) != 2 || plain.Steps[1].Status != "failed" {
		t.Errorf("steps %+v, want the strict step failed by sh -e", plain.Steps)
	} else if log1 := o.logText(t, runID, plain.JobID, 1); strings.Contains(log1, "not reached") {
		t.Errorf("sh ran on after a failing command:\n%s", log1)
	}
	jobLog := o.logText(t, runID, plain.JobID, -1)
	for _, want := range []string{"Service web (" + jobImage + "): last", "web | service-says-hello", "web | service-to-stderr"} {
		if !strings.Contains(jobLog, want) {
			t.Errorf("job log lacks %q:\n%s", want, jobLog)
		}
	}

	if sick.Status != "failed" || !strings.Contains(sick.ErrorMessage, "not healthy") {
		t.Errorf("sick job %s %q", sick.Status, sick.ErrorMessage)
	}
	if sickLog := o.logText(t, runID, sick.JobID, -1); !strings.Contains(sickLog, "db | db-cannot-start-missing-config") {
		t.Errorf("the unhealthy service's output is not in the job log:\n%s", sickLog)
	}
	for _, id := range []string{plain.JobID, sick.JobID} {
		if c, n := jobDockerObjects(t, cli, id); c != 0 || n != 0 {
			t.Errorf("job %s: %d containers and %d networks left", id, c, n)
		}
	}
}
