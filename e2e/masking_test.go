package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"kici.dev/kici/internal/termtext"
)

// splitSecretWorkflow prints the release secret the ways a terminal (and
// the job page) would still show whole: pieces joined by an SGR reset, a
// carriage return, colour changes, an OSC title and a cursor movement.
const splitSecretWorkflow = `name: split
on:
  push:
    branches: [main]
jobs:
  leak:
    contexts: [release]
    steps:
      - name: print
        secrets:
          S: release:npm_token
        run: |
          printf 'ansi: %s\033[0m%s\n' "${S:0:5}" "${S:5}"
          printf 'cr: %s\r%s\n' "${S:0:5}" "${S:5}"
          printf 'colour: \033[31m%s\033[1m%s\033[0m end\n' "${S:0:3}" "${S:3}"
          printf 'osc: %s\033]0;title\007%s\n' "${S:0:7}" "${S:7}"
          printf 'cursor: %s\033[2K\033[1G%s\n' "${S:0:2}" "${S:2}"
          echo marker-done
`

// A step prints its secret split by ANSI sequences and a carriage return:
// the stored log holds each as ***, and the job page, rendered by a real
// browser, shows the masks and never the secret.
func TestSecretSplitByEscapesMaskedInStoredLogAndJobPage(t *testing.T) {
	o := startOrchestrator(t)
	o.releaseContext(t)
	repo := repoWithWorkflow(t, splitSecretWorkflow)
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	if r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run %s: %s (%s)", runID, r.Status, r.FailureReason)
	}
	job := o.jobsOf(t, runID)["leak"]
	stored := o.logText(t, runID, job.JobID, 0)
	if !strings.Contains(stored, "marker-done") {
		t.Fatalf("stored log incomplete:\n%q", stored)
	}
	for _, prefix := range []string{"ansi: ***", "cr: ***", "colour: \x1b[31m***\x1b[0m end", "osc: ***", "cursor: ***"} {
		if !strings.Contains(stored, prefix) {
			t.Errorf("stored log lacks %q:\n%q", prefix, stored)
		}
	}
	if strings.Contains(termtext.Visible(stored), secretToken) {
		t.Fatalf("stored log shows the secret:\n%q", stored)
	}

	b := newBrowser(t, o.url, "owner")
	b.signIn(o.token)
	b.do("job page", chromedp.Navigate(fmt.Sprintf("%s/ui/runs/%s/jobs/%s?step=0", o.url, runID, job.JobID)),
		chromedp.WaitVisible(`//td[contains(., "marker-done")]`))
	page := js[string](b, `document.body.innerText`)
	if strings.Contains(page, secretToken) || !strings.Contains(page, "ansi: ***") || !strings.Contains(page, "cr: ***") {
		t.Fatalf("job page text:\n%s", page)
	}
}
