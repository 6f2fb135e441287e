package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/wait"
)

// pagesWorkflow's job finishes a first step, then runs a second that
// prints a line and waits for a gate file (the job page of the running job
// must open on that second step), then a short third.
func pagesWorkflow(marks string) string {
	return `name: pages
on: {push: {branches: [main]}}
jobs:
  build:
    steps:
      - name: prepare
        run: echo prepared
      - name: long work
        run: |
          echo "working on a line long enough to need the whole width of a phone screen to be read without scrolling"
          while [ ! -f ` + marks + `/gate ]; do sleep 0.1; done
      - name: after the gate
        run: |
          echo "the last step"
          sleep 2
`
}

// TestWebPagesAtPhoneAndDesktopWidth opens the web UI of a real
// orchestrator in headless Chromium at 390 px (a phone) and 1400 px: the
// job page of a running job opens on its running step with the set-up
// finished and an elapsed time that counts on; its log keeps the width of
// the screen at 390 px; the runs table scrolls inside its box so its last
// column can be reached, and stays scrolled when the list refreshes; a
// status badge of the workflow is served as SVG to the signed-in browser
// and refused to an anonymous request (badges are private by default);
// and a job page opened without a step follows the job to its next step.
func TestWebPagesAtPhoneAndDesktopWidth(t *testing.T) {
	chromiumPath(t)
	marks := marksDir(t)
	o := startOrchestrator(t)
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, ".kici/workflows/pages.yaml"), pagesWorkflow(marks))
	run(t, repo, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "Pages: a phone-width layout\n\nThe body of the message.")
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "pagesrc", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	var runID string
	wait.For(t, 30*time.Second, "the run", func() bool {
		var list struct {
			Runs []runView `json:"runs"`
		}
		o.get(t, "/api/v1/admin/runs?deliveryId="+delivery, &list)
		if len(list.Runs) > 0 {
			runID = list.Runs[0].RunID
		}
		return runID != ""
	})
	var jobID string
	wait.For(t, 60*time.Second, "the second step to run", func() bool {
		j := o.jobsOf(t, runID)["build"]
		jobID = j.JobID
		return len(j.Steps) > 1 && j.Steps[1].Status == "running"
	})
	defer write(t, filepath.Join(marks, "gate"), "")

	b := newBrowser(t, o.url, "pages")
	b.signIn(o.token)
	jobPage := fmt.Sprintf("%s/ui/runs/%s/jobs/%s", o.url, runID, jobID)
	for _, width := range []int64{390, 1400} {
		b.do(fmt.Sprintf("viewport %d", width), chromedp.EmulateViewport(width, 844))

		// The job page opens on the running step, the set-up is done and
		// the elapsed time counts on.
		b.do("job page", chromedp.Navigate(jobPage), chromedp.WaitVisible(`//td[contains(., "working on a line")]`))
		if step := js[string](b, `document.querySelector("#steps li.on").dataset.step`); step != "1" {
			t.Errorf("%d px: the running job opened on step %s, want 1 (the running step)", width, step)
		}
		if setup := b.text(`#steps li[data-step="-1"] .badge`); setup != "success" {
			t.Errorf("%d px: the finished set-up reads %q", width, setup)
		}
		first := b.text(`#steps li.on .elapsed`)
		var later string
		if !wait.Until(10*time.Second, func() bool { later = b.text(`#steps li.on .elapsed`); return later != first && later != "" }) {
			t.Errorf("%d px: the running step's elapsed time did not count on (%q then %q)", width, first, later)
		}
		logW := js[float64](b, `document.getElementById("log").getBoundingClientRect().width`)
		want := 300.0
		if width == 1400 {
			want = 800
		}
		if logW < want {
			t.Errorf("%d px: the log is %.0f px wide, want at least %.0f", width, logW, want)
		}
		if over := js[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
			t.Errorf("%d px: the job page is wider than the screen (%v px)", width, js[float64](b, `document.documentElement.scrollWidth`))
		}

		// The runs table: its last column can be reached, by scrolling its
		// box at phone width; the page itself is no wider than the screen.
		b.do("runs page", chromedp.Navigate(o.url+"/ui/runs"), chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id="`+runID+`"]`)))
		reach := js[string](b, `(() => {
			const box = document.getElementById("runs-scroll");
			box.scrollLeft = box.scrollWidth;
			const last = document.querySelector("#runs thead th:last-child").getBoundingClientRect();
			return [Math.round(last.left), Math.round(last.right), window.innerWidth, box.scrollWidth > box.clientWidth].join(" ");
		})()`)
		var left, right, inner int
		var scrolls bool
		if _, err := fmt.Sscanf(reach, "%d %d %d %t", &left, &right, &inner, &scrolls); err != nil {
			t.Fatal(err)
		}
		if left < 0 || right > inner+1 {
			t.Errorf("%d px: the runs table's last column cannot be reached (left %d, right %d, screen %d)", width, left, right, inner)
		}
		if width == 390 && !scrolls {
			t.Errorf("390 px: the runs table does not scroll in its box (%s)", reach)
		}
		if width == 390 {
			// The list refreshes itself every few seconds: the table stays
			// scrolled where the reader left it.
			kept := js[string](b, `new Promise(res => {
				document.getElementById("runs").dataset.mark = "old";
				const t0 = Date.now();
				(function wait() {
					const fresh = !document.getElementById("runs").dataset.mark;
					if (fresh || Date.now() - t0 > 10000) { return res(fresh + " " + document.getElementById("runs-scroll").scrollLeft); }
					setTimeout(wait, 100);
				})();
			})`)
			if !strings.HasPrefix(kept, "true ") || strings.HasSuffix(kept, " 0") {
				t.Errorf("390 px: after the list refreshed (refreshed, scrollLeft) = %q, want the scroll kept", kept)
			}
		}
		if over := js[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
			t.Errorf("%d px: the runs page is wider than the screen", width)
		}
		if title := b.text(`tr[data-run-id="` + runID + `"] .commit-title`); title != "Pages: a phone-width layout" {
			t.Errorf("%d px: the run's commit title reads %q", width, title)
		}
	}

	// The badge: SVG for the signed-in browser, 401 without the session.
	badge := js[string](b, `fetch("/ui/badge/pagesrc/pages.svg?branch=main").then(async r => r.status + " " + r.headers.get("Content-Type") + " " + r.headers.get("Cache-Control") + " " + await r.text())`)
	if !strings.HasPrefix(badge, "200 image/svg+xml") || !strings.Contains(badge, "no-cache") || !strings.Contains(badge, ">running<") {
		t.Errorf("badge for the signed-in browser: %.300s", badge)
	}
	anon := js[string](b, `fetch("/ui/badge/pagesrc/pages.svg?branch=main", {credentials: "omit"}).then(r => r.status + " " + r.headers.get("Content-Type"))`)
	if anon != "401 image/svg+xml; charset=utf-8" {
		t.Errorf("badge without a session: %s", anon)
	}

	// A job page opened without a step follows the job: when the running
	// step ends it opens on the next one.
	b.do("follow the job", chromedp.Navigate(jobPage), chromedp.WaitVisible(chromedp.ID("tail-state")))
	write(t, filepath.Join(marks, "gate"), "")
	b.do("the next step is opened", chromedp.WaitVisible(`//li[@aria-current="step" and @data-step="2"]`))
	// Opened anew, not redrawn in place: the page follows the new step's
	// log stream.
	if stream := js[string](b, `document.body.dataset.liveUrl`); !strings.Contains(stream, "/steps/2/logs/stream") {
		t.Errorf("after the step ended the page follows %q, not step 2's log", stream)
	}
}

// TestWebPagesForkPullRequestInChromium: a fork pull request held by the
// trust policy shows, on the held runs page and the run page, who opened
// it, from which fork, its title and links to it and its changed files;
// the owner approves it on the run page and the run proceeds.
func TestWebPagesForkPullRequestInChromium(t *testing.T) {
	chromiumPath(t)
	repo := repoWithWorkflow(t, quickWorkflowPR) // a fork's pull requests are held by the default trust policy
	baseSHA := git(t, repo, "rev-parse", "HEAD")
	lock, err := os.ReadFile(filepath.Join(repo, ".kici/kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	git(t, repo, "checkout", "-q", "-b", "fork")
	write(t, filepath.Join(repo, "change.txt"), "a change\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "a change from a fork")
	headSHA := git(t, repo, "rev-parse", "HEAD")
	git(t, repo, "checkout", "-q", "main")

	fake := ghfake.New(ingressApp)
	defer fake.Close()
	for _, ref := range []string{"main", baseSHA, headSHA} {
		fake.SetFile(ingressRepo, ref, ".kici/kici.lock.json", lock)
	}
	fake.SetBranch(ingressRepo, "main", baseSHA)
	fake.SetPermission(ingressRepo, "outsider", "read")
	o := startOrchestrator(t, loopbackSourcesEnv)
	srcID := o.addGitHubAppSource(t, fake)
	pr, _ := json.Marshal(map[string]any{"action": "opened", "number": 7, "installation": map[string]any{"id": 9},
		"pull_request": map[string]any{"number": 7, "title": "Faster <b>parser</b>", "html_url": "https://github.com/acme/api/pull/7",
			"user": map[string]any{"login": "outsider"},
			"head": map[string]any{"ref": "fork", "sha": headSHA, "repo": map[string]any{"full_name": "outsider/api", "html_url": "https://github.com/outsider/api"}},
			"base": map[string]any{"ref": "main", "sha": baseSHA, "repo": map[string]any{"full_name": ingressRepo}}},
		"repository": map[string]any{"full_name": ingressRepo, "default_branch": "main", "clone_url": "file://" + repo},
		"sender":     map[string]any{"login": "outsider", "id": 31337}})
	postGitHubEvent(t, o.url+"/webhook/acme/github/"+srcID, "pull_request", "pages-pr-7", pr)
	runID := o.runOf(t, fmt.Sprintf("github:%d:pages-pr-7", ingressApp))
	o.waitRunStatus(t, runID, 30*time.Second, "held")

	b := newBrowser(t, o.url, "fork")
	b.signIn(o.token)
	b.do("held page", chromedp.Navigate(o.url+"/ui/held"), chromedp.WaitVisible(chromedp.CSS("#held .pull")))
	want := "#7 Faster <b>parser</b> by outsider from outsider/api · Files changed"
	if got := strings.Join(strings.Fields(b.text("#held .pull")), " "); got != want {
		t.Errorf("held page change = %q, want %q", got, want)
	}
	if diff := js[string](b, `document.querySelector("#held a.pr-diff").href`); diff != "https://github.com/acme/api/pull/7/files" {
		t.Errorf("held page diff link = %q", diff)
	}
	b.do("run page", chromedp.Navigate(o.url+"/ui/runs/"+runID), chromedp.WaitVisible(chromedp.ID("holds")))
	if got := strings.Join(strings.Fields(b.text("#pull .pull")), " "); got != want {
		t.Errorf("run page pull request = %q, want %q", got, want)
	}
	b.do("approve on the run page",
		chromedp.SendKeys(chromedp.CSS(`#holds input[name="comment"]`), "read the diff"),
		chromedp.Click(chromedp.CSS("#holds button.approve")),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	if flash := b.text(".flash"); !strings.Contains(flash, "approved") {
		t.Errorf("flash after approving on the run page: %q", flash)
	}
	if loc := js[string](b, `location.pathname`); loc != "/ui/runs/"+runID {
		t.Errorf("the decision returned to %s, not the run page", loc)
	}
	if r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled"); r.Status != "success" {
		t.Errorf("fork run after approval = %s (%s)", r.Status, r.FailureReason)
	}
}
