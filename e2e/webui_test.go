package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"kici.dev/kici/internal/testutil/wait"
)

// evilJobName carries markup (the compiler refuses parentheses in job
// names, so the handler calls alert with a template literal).
const evilJobName = "build <img src=x onerror=alert`1`>"

// evilCommit is the message of the commit the browser tests build.
const evilCommit = "Ship it <script>window.__pwned='commit'</script>"

// webWorkflow's first job prints markup and colours, then waits for a
// gate file so the test can watch its log grow; test runs after it.
func webWorkflow(marks string) string {
	return `name: web
on: {push: {branches: [main]}}
jobs:
  "` + evilJobName + `":
    steps:
      - name: talk
        run: |
          echo "<script>window.__pwned='log'</script>"
          printf '\033[32mgreen text\033[0m\n'
          echo "tail line 1"
          while [ ! -f ` + marks + `/gate ]; do sleep 0.1; done
          echo "tail line 2 after the gate"
  test:
    needs: ["` + evilJobName + `"]
    steps:
      - run: echo tested
`
}

// heldWorkflow's job is bound to context release, which requires a
// reviewer: it is held until someone decides.
const heldWorkflow = `name: deploy
on: {push: {branches: [main]}}
jobs:
  deploy:
    contexts: [release]
    steps:
      - run: echo deployed
`

// chromiumPath finds Debian's chromium; make test installs it
// (scripts/test-deps.sh). Without it the browser tests fail rather than
// skip: a skipped browser test would read as a passing UI.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run make test (it installs it), or apt-get install -y chromium")
	return ""
}

// browser is one headless Chromium with its own profile (cookie jar).
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	dialogs atomic.Int32
}

// newBrowser starts headless Chromium; at cleanup, a failed test keeps a
// screenshot of the page it was on.
func newBrowser(t *testing.T, base, name string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t, base: base}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.dialogs.Add(1)
			// Best effort: the dialog is counted above, and the tests check
			// the page, not the dismissal.
			go func() {
				_, _ = chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		}
	}))
	b.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot(name)
		}
		cancel()
		cancelAlloc()
	})
	return b
}

// screenshotDir keeps failure screenshots ($KICI_SCREENSHOT_DIR, else
// e2e/failed-screenshots, which git ignores).
func screenshotDir() string {
	if d := os.Getenv("KICI_SCREENSHOT_DIR"); d != "" {
		return d
	}
	return "failed-screenshots"
}

func (b *browser) screenshot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Location())
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s failed: %v", name, err)
		return
	}
	dir := screenshotDir()
	_ = os.MkdirAll(dir, 0o755)
	path, _ := filepath.Abs(filepath.Join(dir, strings.ReplaceAll(b.t.Name(), "/", "_")+"-"+name+".png"))
	if err := os.WriteFile(path, png, 0o644); err == nil {
		b.t.Logf("screenshot of %s (%s) kept at %s", name, url, path)
	}
}

// do performs actions with a time limit, failing the test on error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that returns a value.
func get[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// js evaluates an expression (awaiting a promise) in the page.
func js[T any](b *browser, expr string) T {
	b.t.Helper()
	return get(b, expr, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

func (b *browser) text(css string) string {
	b.t.Helper()
	return strings.TrimSpace(get(b, "text of "+css, chromedp.Text(chromedp.CSS(css))))
}

func (b *browser) signIn(token string) {
	b.t.Helper()
	b.do("sign in",
		chromedp.Navigate(b.base+"/ui/runs"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("runs")))
}

// postStatus posts form fields from the page with fetch (a hand-made
// request riding on the browser's session) and returns the HTTP status.
func (b *browser) postStatus(path string, fields map[string]string) int {
	b.t.Helper()
	var parts []string
	for k, v := range fields {
		parts = append(parts, fmt.Sprintf("%q: %q", k, v))
	}
	return js[int](b, fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams({%s}), redirect: "manual"}).then(r => r.status)`,
		path, strings.Join(parts, ",")))
}

// TestWebUIInChromium drives the web UI of a real orchestrator in
// headless Chromium: sign-in, a running step's lines appearing without a
// reload, the run page's needs graph and statuses, the finished run in the
// list, markup from the repository and the log staying inert, CSRF and
// permission refusals of hand-made POSTs, and an approval from the held
// runs page letting the held run proceed.
func TestWebUIInChromium(t *testing.T) {
	chromiumPath(t)
	marks := marksDir(t)
	o := startOrchestrator(t)
	o.admin(t, "context", "create", "--org", "acme", "--name", "release", "--required-reviewers", "alice")
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, ".kici/workflows/web.yaml"), webWorkflow(marks))
	write(t, filepath.Join(repo, ".kici/workflows/deploy.yaml"), heldWorkflow)
	run(t, repo, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", evilCommit)
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "web", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	var webRun, deployRun string
	wait.For(t, 30*time.Second, "both runs", func() bool {
		var list struct {
			Runs []runView `json:"runs"`
		}
		o.get(t, "/api/v1/admin/runs?deliveryId="+delivery, &list)
		for _, r := range list.Runs {
			if r.WorkflowName == "web" {
				webRun = r.RunID
			} else {
				deployRun = r.RunID
			}
		}
		return webRun != "" && deployRun != ""
	})
	var buildJob string
	wait.For(t, 60*time.Second, "the first job's step to start", func() bool {
		j := o.jobsOf(t, webRun)[evilJobName]
		buildJob = j.JobID
		return len(j.Steps) > 0 && j.Steps[0].Status == "running"
	})

	owner := newBrowser(t, o.url, "owner")
	owner.signIn(o.token)

	// A running step's lines appear on the page without a reload.
	jobPage := fmt.Sprintf("%s/ui/runs/%s/jobs/%s?step=0", o.url, webRun, buildJob)
	owner.do("job page tails the log",
		chromedp.Navigate(jobPage),
		chromedp.WaitVisible(`//td[contains(., "tail line 1")]`),
		chromedp.WaitVisible(chromedp.ID("tail-state")))
	js[string](owner, `window.__sameDocument = "yes"`)
	write(t, filepath.Join(marks, "gate"), "")
	owner.do("the new line arrives", chromedp.WaitVisible(`//td[contains(., "tail line 2 after the gate")]`))
	if same := js[string](owner, `window.__sameDocument || "reloaded"`); same != "yes" {
		t.Errorf("the page reloaded to show the new line (%q)", same)
	}
	if green := js[string](owner, `Array.from(document.querySelectorAll("#log span.a-f2")).map(s => s.textContent).join("|")`); green != "green text" {
		t.Errorf("coloured spans = %q", green)
	}

	if r := o.waitRunStatus(t, webRun, 90*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("web run = %s (%s)", r.Status, r.FailureReason)
	}

	// The run page: graph, statuses, and nothing from the repository runs.
	owner.do("run page", chromedp.Navigate(o.url+"/ui/runs/"+webRun), chromedp.WaitVisible(chromedp.ID("graph")))
	nodes := js[int](owner, `document.querySelectorAll("#graph .node").length`)
	successNodes := js[int](owner, `document.querySelectorAll("#graph .node.st-success").length`)
	edges := js[int](owner, `document.querySelectorAll("#graph path.edge").length`)
	images := js[int](owner, `document.querySelectorAll("img").length`)
	runStatus := owner.text("#run-status")
	jobTitle := owner.text("#jobs tbody tr:first-child td:nth-child(2)")
	commit := js[string](owner, `document.getElementById("commit-message").textContent`)
	if nodes != 2 || successNodes != 2 || edges != 1 || runStatus != "success" {
		t.Errorf("graph: %d nodes (%d success), %d edges, run %q", nodes, successNodes, edges, runStatus)
	}
	if images != 0 || jobTitle != evilJobName || commit != evilCommit {
		t.Errorf("markup was not inert: %d images, job %q, commit %q", images, jobTitle, commit)
	}
	owner.do("job page markup", chromedp.Navigate(jobPage), chromedp.WaitVisible(chromedp.ID("log")))
	if pwned := js[string](owner, `String(window.__pwned)`); pwned != "undefined" || owner.dialogs.Load() != 0 {
		t.Errorf("a script from the repository or the log ran: __pwned=%s, %d dialogs", pwned, owner.dialogs.Load())
	}

	// The finished run is listed.
	owner.do("runs list", chromedp.Navigate(o.url+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("runs")))
	if listed := owner.text(fmt.Sprintf(`tr[data-run-id="%s"] .badge`, webRun)); listed != "success" {
		t.Errorf("runs list shows the web run as %q", listed)
	}

	// A POST without the CSRF token is refused and changes nothing.
	if st := owner.postStatus("/ui/runs/"+deployRun+"/cancel", map[string]string{}); st != 403 {
		t.Errorf("cancel without a CSRF token: %d, want 403", st)
	}
	holds := o.heldRuns(t, deployRun)
	if len(holds) != 1 {
		t.Fatalf("held runs of the deploy run: %+v", holds)
	}
	holdRow := fmt.Sprintf(`tr[data-hold-id="%s"]`, holds[0].ID)

	// An auditor sees the hold but no approve control, and a hand-made
	// POST with its own valid CSRF token is refused.
	var audTok string
	for _, line := range strings.Split(o.admin(t, "token", "create", "--role", "auditor", "--label", "aud"), "\n") {
		if v, ok := strings.CutPrefix(line, "token: "); ok {
			audTok = strings.TrimSpace(v)
		}
	}
	auditor := newBrowser(t, o.url, "auditor")
	auditor.signIn(audTok)
	auditor.do("auditor held page", chromedp.Navigate(o.url+"/ui/held"), chromedp.WaitVisible(chromedp.CSS(holdRow)))
	if n := js[int](auditor, `document.querySelectorAll("button.approve, button.reject").length`); n != 0 {
		t.Errorf("the auditor sees %d decision buttons", n)
	}
	csrf := js[string](auditor, `document.querySelector('input[name="csrf"]').value`)
	if st := auditor.postStatus("/ui/held/"+holds[0].ID+"/decision", map[string]string{"csrf": csrf, "decision": "approve"}); st != 403 {
		t.Errorf("auditor's hand-made approval: %d, want 403", st)
	}
	if h := o.heldRuns(t, deployRun); len(h) != 1 || h[0].Status != "pending" {
		t.Fatalf("hold after the refused POSTs: %+v", h)
	}

	// The owner approves from the page, with a comment: the run proceeds.
	owner.do("approve", chromedp.Navigate(o.url+"/ui/held"),
		chromedp.SendKeys(chromedp.CSS(holdRow+` input[name="comment"]`), "ship it"),
		chromedp.Click(chromedp.CSS(holdRow+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	if flash := owner.text(".flash"); !strings.Contains(flash, "approved") {
		t.Errorf("flash after approving: %q", flash)
	}
	if r := o.waitRunStatus(t, deployRun, 90*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Errorf("deploy run after approval = %s (%s)", r.Status, r.FailureReason)
	}
}
