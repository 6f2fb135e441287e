package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/wait"
)

// delivery is one webhook request received by the test server.
type delivery struct {
	path    string
	headers http.Header
	body    []byte
	sigOK   bool
}

// harness is an httptest server serving the real admin API (SQLite store,
// admin auth, filesystem logs) plus a webhook endpoint that verifies the
// HMAC signature with the source's stored secret.
type harness struct {
	t     *testing.T
	st    store.Store
	logs  *logstore.FS
	srv   *httptest.Server
	token string

	mu         sync.Mutex
	deliveries []delivery
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := auth.NewAdminAuth(st, nil)
	tok, err := a.EnsureOwnerToken(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, st: st, logs: logstore.NewFS(filepath.Join(dir, "logs")), token: tok}
	mux := api.NewRouter(api.Deps{Store: st, Auth: a, Logs: h.logs, Approvals: approval.NewDecider(st, nil)})
	mux.HandleFunc("POST /webhook/{org}/generic/{name}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		src, err := st.GetSourceByName(r.Context(), r.PathValue("org"), r.PathValue("name"))
		if err != nil {
			http.Error(w, `{"error":"Source not found"}`, 404)
			return
		}
		want := Sign(src.WebhookSecret, body)
		ok := hmac.Equal([]byte(want), []byte(r.Header.Get("X-Kici-Signature-256")))
		h.mu.Lock()
		h.deliveries = append(h.deliveries, delivery{path: r.URL.Path, headers: r.Header.Clone(), body: body, sigOK: ok})
		h.mu.Unlock()
		if !ok {
			w.WriteHeader(401)
			if _, err := w.Write([]byte(`{"error":"Invalid signature"}`)); err != nil {
				t.Error(err)
			}
			return
		}
		w.WriteHeader(202)
		fmt.Fprintf(w, `{"accepted":true,"deliveryId":%q}`, src.RoutingKey+":"+r.Header.Get("X-Kici-Delivery"))
	})
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

// run executes kici-admin in-process against the harness.
func (h *harness) run(args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	return h.runEnv(map[string]string{"KICI_ADMIN_URL": h.srv.URL, "KICI_ADMIN_TOKEN": h.token}, args...)
}

func (h *harness) runEnv(env map[string]string, args ...string) (string, string, int) {
	h.t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, IO{
		Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	})
	return out.String(), errb.String(), code
}

func (h *harness) mustRun(args ...string) string {
	h.t.Helper()
	out, errs, code := h.run(args...)
	if code != 0 {
		h.t.Fatalf("kici-admin %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func tgit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository on branch main with two commits.
func newRepo(t *testing.T) (dir, first, second string) {
	t.Helper()
	dir = t.TempDir()
	tgit(t, dir, "init", "-q", "-b", "main")
	tgit(t, dir, "commit", "-q", "--allow-empty", "-m", "one")
	first = tgit(t, dir, "rev-parse", "HEAD")
	tgit(t, dir, "commit", "-q", "--allow-empty", "-m", "two")
	second = tgit(t, dir, "rev-parse", "HEAD")
	return dir, first, second
}

func (h *harness) addLocalSource(repo, name string) string {
	h.t.Helper()
	out := h.mustRun("source", "add", "local", "--org", "demo", "--path", repo, "--name", name, "--json")
	var resp struct {
		Source apitypes.SourceView `json:"source"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		h.t.Fatalf("%v: %s", err, out)
	}
	return resp.Source.ID
}

func TestSourceCommands(t *testing.T) {
	h := newHarness(t)
	repo, _, _ := newRepo(t)

	out := h.mustRun("source", "add", "local", "--org", "demo", "--path", repo)
	name := defaultSourceName(repo)
	for _, want := range []string{"Created local source \"" + name + "\" in org \"demo\"", "routing key: generic:demo:", "path:        " + repo, "webhook:     " + h.srv.URL + "/webhook/demo/generic/" + name, "kici-admin source trigger-local "} {
		if !strings.Contains(out, want) {
			t.Errorf("add output lacks %q:\n%s", want, out)
		}
	}
	id := h.addLocalSource(filepath.Join(repo, "."), "second")

	out = h.mustRun("source", "list")
	if !strings.Contains(out, "ID") || !strings.Contains(out, "NAME") || !strings.Contains(out, name) || !strings.Contains(out, "second") || !strings.Contains(out, repo) {
		t.Errorf("list:\n%s", out)
	}
	out = h.mustRun("source", "list", "--json")
	var list struct {
		Sources []apitypes.SourceView `json:"sources"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Sources) != 2 {
		t.Fatalf("list --json: %v %s", err, out)
	}
	out = h.mustRun("source", "get", id)
	if !strings.Contains(out, "second") || !strings.Contains(out, "hmac_sha256") {
		t.Errorf("get:\n%s", out)
	}
	secret := strings.TrimSpace(h.mustRun("source", "get-webhook-secret", id))
	stored, _ := h.st.GetSource(context.Background(), id)
	if secret != stored.WebhookSecret {
		t.Errorf("secret %q != stored %q", secret, stored.WebhookSecret)
	}

	// Duplicate name ⇒ HTTP 409 formatted error.
	_, errs, code := h.run("source", "add", "local", "--org", "demo", "--path", repo, "--name", "second")
	if code != 1 || !strings.HasPrefix(errs, "Error: HTTP 409: A source named \"second\" already exists") {
		t.Errorf("conflict: %d %q", code, errs)
	}
	// Not a repository ⇒ 400 from the server.
	_, errs, code = h.run("source", "add", "local", "--org", "demo", "--path", t.TempDir(), "--name", "x")
	if code != 1 || !strings.Contains(errs, "Error: HTTP 400: localConfig.path") {
		t.Errorf("not a repo: %d %q", code, errs)
	}
	// Missing required flag.
	_, errs, code = h.run("source", "add", "local")
	if code != 1 || !strings.Contains(errs, `required flag(s) "org" not set`) {
		t.Errorf("missing flag: %d %q", code, errs)
	}
}

func TestTriggerLocal(t *testing.T) {
	h := newHarness(t)
	repo, first, second := newRepo(t)
	id := h.addLocalSource(repo, "app")

	out := h.mustRun("source", "trigger-local", id)
	h.mu.Lock()
	if len(h.deliveries) != 1 {
		t.Fatalf("deliveries: %d", len(h.deliveries))
	}
	d := h.deliveries[0]
	h.mu.Unlock()
	if !d.sigOK {
		t.Fatalf("bad signature %q", d.headers.Get("X-Kici-Signature-256"))
	}
	if d.path != "/webhook/demo/generic/app" || d.headers.Get("X-Event-Type") != "push" || d.headers.Get("Authorization") != "" {
		t.Fatalf("request: %s %v", d.path, d.headers)
	}
	rawID := d.headers.Get("X-Kici-Delivery")
	if _, err := uuid.Parse(rawID); err != nil {
		t.Fatalf("X-Kici-Delivery %q: %v", rawID, err)
	}
	var p LocalPushPayload
	if err := json.Unmarshal(d.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Ref != "refs/heads/main" || p.After != second || p.Before != first || p.Repository.FullName != "demo/app" || p.Repository.Path != repo || p.Sender.Login == "" {
		t.Fatalf("payload: %+v", p)
	}
	// Exact wire keys.
	var raw map[string]any
	if err := json.Unmarshal(d.body, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["repository"].(map[string]any)["full_name"]; !ok {
		t.Fatalf("wire keys: %s", d.body)
	}
	src, _ := h.st.GetSource(context.Background(), id)
	wantID := src.RoutingKey + ":" + rawID
	if !strings.Contains(out, wantID) {
		t.Fatalf("output lacks delivery id %q:\n%s", wantID, out)
	}

	// Root commit via --sha: before is 40 zeros; --ref accepts a short name.
	h.mustRun("source", "trigger-local", id, "--ref", "main", "--sha", first[:10])
	h.mu.Lock()
	d = h.deliveries[1]
	h.mu.Unlock()
	if err := json.Unmarshal(d.body, &p); err != nil {
		t.Fatal(err)
	}
	if !d.sigOK || p.After != first || p.Before != ZeroSHA || p.Ref != "refs/heads/main" {
		t.Fatalf("root commit payload: %+v sig=%v", p, d.sigOK)
	}

	// Tags resolve to refs/tags/…
	tgit(t, repo, "tag", "v1", first)
	h.mustRun("source", "trigger-local", id, "--ref", "v1")
	h.mu.Lock()
	d = h.deliveries[2]
	h.mu.Unlock()
	if err := json.Unmarshal(d.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Ref != "refs/tags/v1" || p.After != first {
		t.Fatalf("tag payload: %+v", p)
	}

	// Detached HEAD without --ref ⇒ asks for --ref.
	tgit(t, repo, "checkout", "-q", "--detach", first)
	_, errs, code := h.run("source", "trigger-local", id)
	if code != 1 || !strings.Contains(errs, "detached") || !strings.Contains(errs, "pass --ref") {
		t.Fatalf("detached: %d %q", code, errs)
	}
	// Unknown ref.
	_, errs, code = h.run("source", "trigger-local", id, "--ref", "nope")
	if code != 1 || !strings.Contains(errs, `--ref "nope" does not name a branch or tag`) {
		t.Fatalf("unknown ref: %d %q", code, errs)
	}
	// A generic source cannot be triggered locally.
	out = h.mustRun("source", "add", "generic", "--org", "demo", "--name", "hooks", "--json")
	var g struct {
		Source apitypes.SourceView `json:"source"`
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	_, errs, code = h.run("source", "trigger-local", g.Source.ID)
	if code != 1 || !strings.Contains(errs, "needs a local source") {
		t.Fatalf("generic: %d %q", code, errs)
	}
}

// addRun inserts a run with jobs "build" and "test" and steps for build.
func (h *harness) addRun(runStatus status.Run, created time.Time) (*store.Run, []*store.Job) {
	h.t.Helper()
	ctx := context.Background()
	run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", Status: runStatus, Provider: provider.Local, RepoIdentifier: "demo/app",
		RepoURL: "file:///x", Ref: "refs/heads/main", SHA: strings.Repeat("b", 40), OrgID: "demo", DeliveryID: "d-" + string(runStatus), CreatedAt: created}
	jobs := []*store.Job{
		{ID: uuid.NewString(), RunID: run.ID, JobName: "build", BaseJobName: "build", Status: status.JobPending, Config: json.RawMessage(`{}`), CreatedAt: created},
		{ID: uuid.NewString(), RunID: run.ID, JobName: "test (1.22)", BaseJobName: "test", Status: status.JobPending, Config: json.RawMessage(`{}`),
			MatrixValues: map[string]string{"go": "1.22"}, CreatedAt: created.Add(time.Millisecond)},
	}
	if err := h.st.CreateRun(ctx, run, jobs); err != nil {
		h.t.Fatal(err)
	}
	return run, jobs
}

func TestRunsCommands(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	failed, _ := h.addRun(status.RunFailed, base)
	run, jobs := h.addRun(status.RunRunning, base.Add(time.Minute))
	reason := "no agent with labels [gpu]"
	if _, err := h.st.UpdateJobStatus(ctx, jobs[1].ID, nil, status.JobQueued, store.JobUpdate{PendingReason: &reason}); err != nil {
		t.Fatal(err)
	}
	exit1, dur := 1, int64(2500)
	if err := h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 0, StepName: "Checkout", Status: status.StepSuccess, DurationMs: &dur}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 1, StepName: "Unit tests", Status: status.StepFailed, ExitCode: &exit1, DurationMs: &dur}); err != nil {
		t.Fatal(err)
	}

	out := h.mustRun("runs", "list")
	if !strings.Contains(out, "RUN ID") || strings.Index(out, run.ID) > strings.Index(out, failed.ID) || !strings.Contains(out, "Showing 1–2 of 2") {
		t.Errorf("list:\n%s", out)
	}
	out = h.mustRun("runs", "list", "--status", "failed", "--json")
	var list struct {
		Runs  []apitypes.RunView `json:"runs"`
		Total int                `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Total != 1 || list.Runs[0].RunID != failed.ID {
		t.Fatalf("list --status: %v %s", err, out)
	}
	if out = h.mustRun("runs", "list", "--count", "--repo", "demo/app"); strings.TrimSpace(out) != "2" {
		t.Errorf("count: %q", out)
	}
	_, errs, code := h.run("runs", "list", "--status", "bogus")
	if code != 1 || !strings.HasPrefix(errs, `Error: HTTP 400: Invalid status "bogus" (allowed: pending,`) {
		t.Errorf("bad status: %d %q", code, errs)
	}

	out = h.mustRun("runs", "show", run.ID)
	for _, want := range []string{run.ID, "running", "demo/app", "JOB", "STEP", "build", "0 Checkout", "1 Unit tests", "exit 1", "2.5s", "test (1.22)", "queued", reason} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out = h.mustRun("runs", "show", run.ID, "--json")
	var shown struct {
		Run  apitypes.RunView   `json:"run"`
		Jobs []apitypes.JobView `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.Run.RunID != run.ID || len(shown.Jobs) != 2 || len(shown.Jobs[0].Steps) != 2 {
		t.Fatalf("show --json: %v %s", err, out)
	}
	out = h.mustRun("runs", "summary", run.ID)
	if !strings.Contains(out, "Run "+run.ID+" (ci): running") || !strings.Contains(out, "1 Unit tests") {
		t.Errorf("summary:\n%s", out)
	}
	out = h.mustRun("runs", "jobs", run.ID)
	if !strings.Contains(out, jobs[0].ID) || !strings.Contains(out, reason) {
		t.Errorf("jobs:\n%s", out)
	}
	out = h.mustRun("runs", "jobs", run.ID, "--include-steps", "--json")
	if !strings.Contains(out, `"stepName": "Unit tests"`) {
		t.Errorf("jobs --include-steps --json:\n%s", out)
	}

	// Error formatting for unknown runs.
	_, errs, code = h.run("runs", "show", uuid.NewString())
	if code != 1 || errs != "Error: HTTP 404: Run not found\n" {
		t.Errorf("404: %d %q", code, errs)
	}
	// Authentication errors.
	_, errs, code = h.runEnv(map[string]string{"KICI_ADMIN_URL": h.srv.URL, "KICI_ADMIN_TOKEN": "kadm_wrong"}, "runs", "list")
	if code != 1 || errs != "Error: HTTP 401: Invalid or expired token\n" {
		t.Errorf("401: %d %q", code, errs)
	}
}

func TestConnectionErrors(t *testing.T) {
	h := newHarness(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	_, errs, code := h.runEnv(map[string]string{"KICI_ADMIN_URL": dead, "KICI_ADMIN_TOKEN": "x"}, "runs", "list")
	if code != 1 || !strings.Contains(errs, "connection refused") || !strings.Contains(errs, "is kici-orchestrator running?") {
		t.Errorf("refused: %d %q", code, errs)
	}
	// No URL and no local orchestrator.
	dir := t.TempDir()
	_, errs, code = h.runEnv(map[string]string{"KICI_DATA_DIR": dir}, "runs", "list")
	if code != 1 || errs != "Error: no orchestrator found in "+dir+": start kici-orchestrator or pass --url/--token\n" {
		t.Errorf("no local: %d %q", code, errs)
	}
	// A URL without a token is refused rather than sending the local token elsewhere.
	_, errs, code = h.runEnv(map[string]string{"KICI_ADMIN_URL": h.srv.URL, "KICI_DATA_DIR": dir}, "runs", "list")
	if code != 1 || !strings.Contains(errs, "no admin token") {
		t.Errorf("no token: %d %q", code, errs)
	}
}

func TestLocalEndpointDiscovery(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	if err := config.WriteLocalEndpoint(dir, h.srv.URL, 0); err != nil {
		t.Fatal(err)
	}
	if err := config.WriteAdminToken(dir, h.token); err != nil {
		t.Fatal(err)
	}
	out, errs, code := h.runEnv(map[string]string{"KICI_DATA_DIR": dir}, "runs", "list")
	if code != 0 || !strings.Contains(out, "No runs") {
		t.Fatalf("env data dir: %d %q %q", code, out, errs)
	}
	out, errs, code = h.runEnv(nil, "--data-dir", dir, "source", "list")
	if code != 0 || !strings.Contains(out, "No sources") {
		t.Fatalf("--data-dir: %d %q %q", code, out, errs)
	}
	// The local token is used with an explicit URL equal to the local one.
	if _, errs, code = h.runEnv(map[string]string{"KICI_DATA_DIR": dir, "KICI_ADMIN_URL": h.srv.URL + "/"}, "runs", "list"); code != 0 {
		t.Fatalf("explicit local url: %d %q", code, errs)
	}
}

func TestLogsFollowAndWait(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	run, jobs := h.addRun(status.RunPending, time.Now().UTC())
	line := func(s string) []protocol.LogLine {
		return []protocol.LogLine{{Timestamp: time.Now().UnixMilli(), Stream: protocol.StreamStdout, Text: s}}
	}
	if err := h.logs.Append(run.ID, jobs[0].ID, -1, line("cloning")); err != nil {
		t.Fatal(err)
	}

	// The "agent": progresses the run while the CLI follows.
	// It reports a failed write with t.Error: it is not the test's goroutine.
	agentErr := func(err error) {
		if err != nil {
			t.Error(err)
		}
	}
	changed := func(_ bool, err error) { agentErr(err) }
	go func() {
		now := time.Now().UTC()
		wait.Elapse(ctx, 150*time.Millisecond) // the agent paces the run's progress
		changed(h.st.UpdateRunStatus(ctx, run.ID, nil, status.RunRunning, store.RunUpdate{StartedAt: &now}))
		changed(h.st.UpdateJobStatus(ctx, jobs[0].ID, nil, status.JobRunning, store.JobUpdate{StartedAt: &now}))
		agentErr(h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 0, StepName: "Compile", Status: status.StepRunning}))
		for i := 0; i < 3; i++ {
			agentErr(h.logs.Append(run.ID, jobs[0].ID, 0, line(fmt.Sprintf("compiling %d", i))))
			wait.Elapse(ctx, 60*time.Millisecond)
		}
		agentErr(h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 0, StepName: "Compile", Status: status.StepSuccess}))
		changed(h.st.UpdateJobStatus(ctx, jobs[0].ID, nil, status.JobSuccess, store.JobUpdate{CompletedAt: &now}))
		changed(h.st.UpdateJobStatus(ctx, jobs[1].ID, nil, status.JobRunning, store.JobUpdate{StartedAt: &now}))
		agentErr(h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: jobs[1].ID, StepIndex: 0, StepName: "Test", Status: status.StepRunning}))
		agentErr(h.logs.Append(run.ID, jobs[1].ID, 0, line("ok pkg")))
		wait.Elapse(ctx, 100*time.Millisecond)
		agentErr(h.logs.Append(run.ID, jobs[1].ID, 0, line("FAIL other")))
		agentErr(h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: jobs[1].ID, StepIndex: 0, StepName: "Test", Status: status.StepFailed}))
		changed(h.st.UpdateJobStatus(ctx, jobs[1].ID, nil, status.JobFailed, store.JobUpdate{CompletedAt: &now}))
		reason := "Failed jobs: test (1.22)"
		changed(h.st.UpdateRunStatus(ctx, run.ID, nil, status.RunFailed, store.RunUpdate{CompletedAt: &now, FailureReason: &reason}))
	}()

	done := make(chan struct{})
	var waitOut, waitErr string
	var waitCode int
	go func() {
		defer close(done)
		waitOut, waitErr, waitCode = h.run("runs", "wait", run.ID, "--interval", "50ms", "--timeout", "20s")
	}()

	start := time.Now()
	out, errs, code := h.run("runs", "logs", run.ID, "--follow", "--interval", "50ms")
	if code != 0 {
		t.Fatalf("logs --follow: %d %q", code, errs)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("follow did not stop")
	}
	want := []string{
		"[build/setup] cloning",
		"[build/Compile] compiling 0",
		"[build/Compile] compiling 1",
		"[build/Compile] compiling 2",
		"[test (1.22)/Test] ok pkg",
		"[test (1.22)/Test] FAIL other",
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("follow output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}

	<-done
	if waitCode != 1 || !strings.Contains(waitOut, "Run "+run.ID+" failed") || !strings.Contains(waitOut, "Failed jobs: test (1.22)") {
		t.Fatalf("wait: %d %q %q", waitCode, waitOut, waitErr)
	}
	if !strings.Contains(waitErr, "run "+run.ID+": pending") && !strings.Contains(waitErr, "run "+run.ID+": running") {
		t.Errorf("wait progress: %q", waitErr)
	}

	// Non-follow, one job and step, raw.
	out = h.mustRun("runs", "logs", run.ID, "--job", "test", "--step", "0", "--raw")
	if out != "ok pkg\nFAIL other\n" {
		t.Fatalf("raw logs: %q", out)
	}
	_, errs, code = h.run("runs", "logs", run.ID, "--job", "deploy")
	if code != 1 || !strings.Contains(errs, `no job "deploy" in this run (jobs: build, test (1.22))`) {
		t.Fatalf("unknown job: %d %q", code, errs)
	}

	// wait on a successful run exits 0; a timeout exits 1.
	ok, _ := h.addRun(status.RunSuccess, time.Now().UTC())
	if out, errs, code := h.run("runs", "wait", ok.ID); code != 0 || !strings.Contains(out, "success") {
		t.Fatalf("wait success: %d %q %q", code, out, errs)
	}
	pending, _ := h.addRun(status.RunPending, time.Now().UTC())
	if _, errs, code := h.run("runs", "wait", pending.ID, "--timeout", "200ms", "--interval", "50ms"); code != 1 || !strings.Contains(errs, "timed out after 200ms") {
		t.Fatalf("wait timeout: %d %q", code, errs)
	}
	// Interrupted (Ctrl-C, SIGTERM: kici-admin cancels its context) long
	// before its timeout: it says so, not that it timed out.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer time.AfterFunc(200*time.Millisecond, cancel).Stop()
	var errb bytes.Buffer
	code = Run(ctx, []string{"runs", "wait", pending.ID, "--timeout", "1h", "--interval", "50ms"}, IO{Stdout: io.Discard, Stderr: &errb,
		Getenv: func(k string) string {
			return map[string]string{"KICI_ADMIN_URL": h.srv.URL, "KICI_ADMIN_TOKEN": h.token}[k]
		}})
	if errs := errb.String(); code != 1 || !strings.Contains(errs, "interrupted while waiting for run "+pending.ID+" (status pending)") || strings.Contains(errs, "timed out") {
		t.Fatalf("wait interrupted: %d %q", code, errs)
	}
}

func TestHelpEverywhere(t *testing.T) {
	root := NewAdminCommand(IO{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
	for _, c := range allCommands(root) {
		if c.Short == "" {
			t.Errorf("%s: no Short", c.CommandPath())
		}
		if c.Runnable() && c.Example == "" && c.Name() != "help" && c.Parent() != nil && c.Parent().Name() != "completion" && c.Name() != "completion" {
			t.Errorf("%s: no Example", c.CommandPath())
		}
	}
	var out bytes.Buffer
	code := Run(context.Background(), []string{"source", "trigger-local", "--help"}, IO{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	if code != 0 || !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("help: %d %s", code, out.String())
	}
}

// The generic-source flags reach the API and are stored as the source's
// ingress settings; bad values are refused with the API's message.
func TestSourceAddGenericFlags(t *testing.T) {
	h := newHarness(t)
	out := h.mustRun("source", "add", "generic", "--org", "demo", "--name", "deploys",
		"--verification-method", "bearer_token", "--rate-limit-rpm", "60", "--max-payload-bytes", "4096",
		"--idempotency-key-path", "$.deployment.id", "--quiet")
	id := strings.TrimSpace(out)
	set, err := h.st.GetSourceSettings(context.Background(), id)
	if err != nil {
		t.Fatalf("settings of %q: %v", id, err)
	}
	if set.RateLimitRPM != 60 || set.MaxPayloadBytes != 4096 || set.IdempotencyKeyPath != "$.deployment.id" {
		t.Fatalf("settings = %+v", set)
	}
	_, errs, code := h.run("source", "add", "generic", "--org", "demo", "--name", "bad",
		"--idempotency-key-header", "X-Id", "--idempotency-key-path", "$.id")
	if code != 1 || !strings.Contains(errs, "not both") {
		t.Fatalf("both keys: %d %q", code, errs)
	}
}
