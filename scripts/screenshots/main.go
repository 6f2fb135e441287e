// Command screenshots writes PNG screenshots of every page of the web UI
// (make screenshots, into docs/img/), each at 1400 px wide (a desktop,
// web-ui-<page>.png) and at 390 px (a phone, web-ui-<page>-phone.png). It starts kici-orchestrator from
// -bin on a throwaway data directory, registers a throwaway repository as
// a local source, pushes a demo workflow (a needs graph with a matrix, a
// coloured log, a failing job and a job held for approval), waits for the
// runs and captures the pages in headless Chromium (Debian's chromium).
// It stops everything it started.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

const workflow = `name: ci
on: {push: {branches: [main]}}
jobs:
  lint:
    steps:
      - name: vet
        run: echo "go vet ./... ok"
  build:
    matrix:
      go: ["1.22", "1.23"]
    steps:
      - name: compile
        run: |
          printf '\033[1mcompiling\033[0m with go %s\n' "$KICI_MATRIX_GO"
          for p in api auth cli store web; do printf '  \033[32mok\033[0m  kici.dev/kici/internal/%s\n' $p; done
  test:
    needs: [build, lint]
    steps:
      - name: unit
        run: |
          for i in $(seq 1 40); do printf '=== RUN   TestCase%02d\n--- \033[32mPASS\033[0m: TestCase%02d (0.0%ds)\n' $i $i $((i % 7)); done
          printf '\033[32mPASS\033[0m\nok  \tkici.dev/kici/internal/web\t0.91s\n'
  flaky:
    needs: [lint]
    steps:
      - name: integration
        run: |
          echo "connecting to the test database"
          printf '\033[31mFAIL\033[0m: TestMigrations: timeout after 5s\n' >&2
          exit 1
  package:
    needs: [test]
    steps:
      - name: tarball
        run: echo "dist/kici-linux-amd64.tar.gz (14.2 MiB)"
`

const heldWorkflow = `name: release
on: {push: {branches: [main]}}
jobs:
  deploy:
    contexts: [production]
    steps:
      - run: echo deployed
`

func main() {
	bin := flag.String("bin", "bin", "directory holding kici-orchestrator, kici-agent, kici-admin and kici")
	out := flag.String("out", "docs/img", "directory the PNGs are written to")
	flag.Parse()
	if err := run(*bin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
		os.Exit(1)
	}
}

func run(bin, out string) error {
	bin, _ = filepath.Abs(bin)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return errors.New("chromium is not installed: apt-get install -y chromium")
	}
	tmp, err := os.MkdirTemp("", "kici-screenshots")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The agent runs steps as an unprivileged user, who must reach the job
	// work directory below TMPDIR: searchable, not listable.
	if err := os.Chmod(tmp, 0o711); err != nil {
		return err
	}
	data := filepath.Join(tmp, "data")
	// Loopback source URLs: the fork pull request's GitHub API is a local fake.
	env := append(os.Environ(), "KICI_DATA_DIR="+data, "KICI_PORT=0", "TMPDIR="+tmp, "KICI_ALLOW_LOCAL_SOURCE_URLS=true")
	orch := exec.Command(filepath.Join(bin, "kici-orchestrator"))
	orch.Env = env
	logf, _ := os.Create(filepath.Join(tmp, "orchestrator.log"))
	orch.Stdout, orch.Stderr = logf, logf
	if err := orch.Start(); err != nil {
		return err
	}
	defer func() {
		_ = orch.Process.Signal(syscall.SIGTERM)
		_ = orch.Wait()
	}()
	url, token, err := waitEndpoint(data)
	if err != nil {
		return err
	}
	admin := func(args ...string) (string, error) {
		c := exec.Command(filepath.Join(bin, "kici-admin"), args...)
		c.Env = env
		b, err := c.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kici-admin %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return strings.TrimSpace(string(b)), nil
	}
	repo := filepath.Join(tmp, "app")
	files := map[string]string{".kici/workflows/ci.yaml": workflow, ".kici/workflows/release.yaml": heldWorkflow,
		".kici/workflows/pr.yaml": prWorkflow, "README.md": "demo\n"}
	for name, body := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	gitEnv := append(os.Environ(), "GIT_AUTHOR_NAME=Ada Lovelace", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada Lovelace", "GIT_COMMITTER_EMAIL=ada@example.com")
	if err := cmdIn(repo, gitEnv, "git", "init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := cmdIn(repo, env, filepath.Join(bin, "kici"), "compile"); err != nil {
		return err
	}
	if err := cmdIn(repo, gitEnv, "git", "add", "-A"); err != nil {
		return err
	}
	if err := cmdIn(repo, gitEnv, "git", "commit", "-qm", "web: show the needs graph of a run\n\nDraw jobs in columns by their longest chain of needs."); err != nil {
		return err
	}
	if _, err := admin("context", "create", "--org", "demo", "--name", "production", "--required-reviewers", "alice"); err != nil {
		return err
	}
	// A webhook for the demo's failures: its host does not resolve, so the
	// Notifications page shows a failed attempt and the next retry.
	if _, err := admin("notification", "add", "--org", "demo", "--channel", "webhook",
		"--target", "https://hooks.demo.invalid/kici", "--outcomes", "failed,fixed"); err != nil {
		return err
	}
	src, err := admin("source", "add", "local", "--org", "demo", "--path", repo, "--name", "app", "--quiet")
	if err != nil {
		return err
	}
	delivery, err := admin("source", "trigger-local", src, "--quiet")
	if err != nil {
		return err
	}
	ciRun, err := waitRun(url, token, delivery)
	if err != nil {
		return err
	}
	sha, err := gitOut(repo, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	prRun, stopFake, err := forkPullRequest(url, token, tmp, repo, sha, admin)
	if err != nil {
		return err
	}
	defer stopFake()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(filepath.Join(tmp, "profile")), chromedp.WindowSize(1200, 820))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	widths := []struct {
		suffix        string
		width, height int64
	}{{"", 1400, 900}, {"-phone", 390, 844}}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// The sign-in page, before signing in.
	for _, w := range widths {
		if err := shoot(ctx, url, out, "login", "/ui/login", "token", w.suffix, w.width, w.height); err != nil {
			return err
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url+"/ui/login"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("runs"))); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	var testJob string
	for _, j := range jobs(url, token, ciRun) {
		if j.JobName == "test" {
			testJob = j.JobID
		}
	}
	var flakyJob string
	for _, j := range jobs(url, token, ciRun) {
		if j.JobName == "flaky" {
			flakyJob = j.JobID
		}
	}
	shots := []struct{ name, path, wait string }{
		{"runs", "/ui/runs", "runs"},
		{"run", "/ui/runs/" + ciRun, "graph"},
		{"job", "/ui/runs/" + ciRun + "/jobs/" + testJob + "?step=0", "log"},
		{"job-failed", "/ui/runs/" + ciRun + "/jobs/" + flakyJob + "?ts=1", "log"},
		{"search", "/ui/runs/" + ciRun + "/jobs/" + testJob + "?step=0&q=PASS", "hits"},
		{"held", "/ui/held", "held"},
		{"run-held", "/ui/runs/" + prRun, "holds"},
		{"sources", "/ui/sources", "main"},
		{"agents", "/ui/agents", "agents"},
		{"notifications", "/ui/notifications", "subscriptions"},
		{"settings", "/ui/settings", "settings"},
	}
	for _, w := range widths {
		for _, s := range shots {
			if err := shoot(ctx, url, out, s.name, s.path, s.wait, w.suffix, w.width, w.height); err != nil {
				return err
			}
		}
	}
	// The status badge of the demo workflow, as a README shows it (read
	// with the browser's session: badges are private by default).
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("runs"))); err != nil {
		return fmt.Errorf("badge: %w", err)
	}
	badge, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("/ui/badge/app/ci.svg?branch=main").then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		return fmt.Errorf("badge: %w", err)
	}
	path := filepath.Join(out, "web-ui-badge.svg")
	if err := os.WriteFile(path, []byte(badge+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", path)
	return nil
}

func gitOut(dir string, args ...string) (string, error) {
	c := exec.Command("git", args...)
	c.Dir = dir
	b, err := c.Output()
	return strings.TrimSpace(string(b)), err
}

func cmdIn(dir string, env []string, name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Dir, c.Env = dir, env
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return nil
}

func waitEndpoint(data string) (url, token string, err error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var ep struct {
			URL string `json:"url"`
		}
		if b, err := os.ReadFile(filepath.Join(data, "orchestrator.json")); err == nil && json.Unmarshal(b, &ep) == nil && ep.URL != "" {
			tok, err := os.ReadFile(filepath.Join(data, "admin-token"))
			return ep.URL, strings.TrimSpace(string(tok)), err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", "", errors.New("the orchestrator did not start in 30 s")
}

func getJSON(url, token string, v any) error {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// waitRun waits until the ci run of delivery has finished and the
// release run is held, and returns the ci run's id.
func waitRun(url, token, delivery string) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var list struct {
			Runs []struct {
				RunID, WorkflowName, Status string
			} `json:"runs"`
		}
		if err := getJSON(url+"/api/v1/admin/runs?deliveryId="+delivery, token, &list); err != nil {
			return "", err
		}
		ci, held := "", false
		for _, r := range list.Runs {
			if r.WorkflowName == "ci" && (r.Status == "success" || r.Status == "failed") {
				ci = r.RunID
			}
			held = held || (r.WorkflowName == "release" && r.Status != "pending")
		}
		if ci != "" && held {
			return ci, nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return "", errors.New("the demo runs did not finish in 2 minutes")
}

type jobView struct{ JobID, JobName string }

func jobs(url, token, runID string) []jobView {
	var resp struct {
		Jobs []jobView `json:"jobs"`
	}
	_ = getJSON(url+"/api/v1/admin/runs/"+runID+"/jobs", token, &resp)
	return resp.Jobs
}

// shoot opens path at width × height, waits for the element with id wait
// and writes docs/img's web-ui-<name><suffix>.png into out.
func shoot(ctx context.Context, url, out, name, path, wait, suffix string, width, height int64) error {
	png, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height), chromedp.Navigate(url+path),
			chromedp.WaitVisible(chromedp.ID(wait))); err != nil {
			return nil, err
		}
		time.Sleep(300 * time.Millisecond)
		return chromedp.CaptureScreenshot()(ctx, t)
	})
	if err != nil {
		return fmt.Errorf("%s at %d px: %w", name, width, err)
	}
	file := filepath.Join(out, "web-ui-"+name+suffix+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d KiB)\n", file, len(png)/1024)
	return nil
}
