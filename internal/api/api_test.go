package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

// env is a router over a real SQLite store, real admin auth and a real
// filesystem log store.
type env struct {
	t       *testing.T
	st      store.Store
	logs    *logstore.FS
	srv     *httptest.Server
	owner   string
	auditor string
}

// openTestStore opens a new SQLite store in dir, closed when the test
// ends, with real admin auth over it.
func openTestStore(t *testing.T, dir string) (store.Store, *auth.AdminAuth) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, auth.NewAdminAuth(st, nil)
}

// issueToken issues an admin token of role, labelled with the role name.
func issueToken(t *testing.T, a *auth.AdminAuth, role auth.Role) string {
	t.Helper()
	tok, _, err := a.IssueAdminToken(context.Background(), string(role), role, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	st, a := openTestStore(t, dir)
	owner := issueToken(t, a, auth.RoleOwner)
	auditor := issueToken(t, a, auth.RoleAuditor)
	logs := logstore.NewFS(filepath.Join(dir, "logs"))
	mux := NewRouter(Deps{Store: st, Auth: a, Logs: logs, Version: "test"})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, logs: logs, srv: srv, owner: owner, auditor: auditor}
}

// do performs a request and decodes the JSON answer into a map.
func (e *env) do(method, path, token, body string) (int, map[string]any, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		e.t.Fatalf("%s %s: non-JSON body %q (status %d)", method, path, data, resp.StatusCode)
	}
	return resp.StatusCode, m, resp.Header
}

func (e *env) get(path string) (int, map[string]any) {
	e.t.Helper()
	code, m, _ := e.do("GET", path, e.owner, "")
	return code, m
}

// addRun inserts a run with the given jobs (names) created at created.
func (e *env) addRun(wf string, runStatus status.Run, repo string, created time.Time, jobNames ...string) (*store.Run, []*store.Job) {
	e.t.Helper()
	run := &store.Run{
		ID: uuid.NewString(), WorkflowName: wf, Status: runStatus, Provider: provider.Local,
		RepoIdentifier: repo, RepoURL: "file:///x", Ref: "refs/heads/main", SHA: strings.Repeat("a", 40),
		DeliveryID: "generic:o:s:" + wf, OrgID: "o", CreatedAt: created,
	}
	var jobs []*store.Job
	for i, n := range jobNames {
		jobs = append(jobs, &store.Job{
			ID: uuid.NewString(), RunID: run.ID, JobName: n, BaseJobName: n, Status: status.JobPending,
			Config: json.RawMessage(`{}`), RunsOnLabels: []string{"linux"}, CreatedAt: created.Add(time.Duration(i) * time.Millisecond),
		})
	}
	if len(jobs) > 1 {
		jobs[1].Needs = []store.Need{{Upstream: jobs[0].JobName, RunOn: []status.Job{status.JobSuccess}}}
	}
	if err := e.st.CreateRun(context.Background(), run, jobs); err != nil {
		e.t.Fatal(err)
	}
	return run, jobs
}

func TestHealthReadyRequestID(t *testing.T) {
	e := newEnv(t)
	code, m, h := e.do("GET", "/health", "", "")
	if code != 200 || m["status"] != "ok" || m["version"] != "test" || h.Get("X-Request-ID") == "" {
		t.Fatalf("health %d %v %v", code, m, h)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/ready", nil)
	req.Header.Set("X-Request-ID", "abc-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-ID") != "abc-123" {
		t.Fatalf("ready %d %q", resp.StatusCode, resp.Header.Get("X-Request-ID"))
	}

	// Not ready.
	st := e.st
	srv := httptest.NewServer(NewRouter(Deps{Store: st, Ready: func(context.Context) error { return fmt.Errorf("warming up") }}))
	defer srv.Close()
	resp, _ = http.Get(srv.URL + "/ready")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "warming up") {
		t.Fatalf("not ready: %d %s", resp.StatusCode, body)
	}
	// No authorizer ⇒ admin routes fail closed.
	resp, _ = http.Get(srv.URL + "/api/v1/admin/runs")
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("no auth: %d", resp.StatusCode)
	}
}

func TestAuthAndRouting(t *testing.T) {
	e := newEnv(t)
	code, m, h := e.do("GET", "/api/v1/admin/runs", "", "")
	if code != 401 || m["error"] != "Missing authorization" || h.Get("X-Request-ID") == "" {
		t.Fatalf("no token: %d %v", code, m)
	}
	code, m, _ = e.do("GET", "/api/v1/admin/runs", "kadm_bogus", "")
	if code != 401 || m["error"] != "Invalid or expired token" {
		t.Fatalf("bad token: %d %v", code, m)
	}
	// Auditors may read runs and sources but not create sources or read secrets.
	if code, _, _ = e.do("GET", "/api/v1/admin/runs", e.auditor, ""); code != 200 {
		t.Fatalf("auditor runs: %d", code)
	}
	if code, _, _ = e.do("GET", "/api/v1/admin/generic-sources", e.auditor, ""); code != 200 {
		t.Fatalf("auditor sources: %d", code)
	}
	code, m, _ = e.do("POST", "/api/v1/admin/generic-sources", e.auditor, `{"orgId":"o","name":"n"}`)
	if code != 403 || !strings.Contains(m["error"].(string), "source.create") {
		t.Fatalf("auditor create: %d %v", code, m)
	}
	code, m, _ = e.do("GET", "/api/v1/admin/generic-sources/x/webhook-secret", e.auditor, "")
	if code != 403 || !strings.Contains(m["error"].(string), "source.secret.read") {
		t.Fatalf("auditor secret: %d %v", code, m)
	}
	// JSON 404 and 405.
	code, m, _ = e.do("GET", "/api/v1/admin/nope", e.owner, "")
	if code != 404 || m["error"] != "Not found" {
		t.Fatalf("404: %d %v", code, m)
	}
	code, m, h = e.do("DELETE", "/api/v1/admin/runs", e.owner, "")
	if code != 405 || h.Get("Allow") != "GET, POST" || !strings.Contains(m["error"].(string), "not allowed") {
		t.Fatalf("405: %d %v %v", code, m, h)
	}
}

func TestRunsList(t *testing.T) {
	e := newEnv(t)
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for i := 0; i < 25; i++ {
		st := status.RunSuccess
		if i%5 == 0 {
			st = status.RunFailed
		}
		wf := "ci"
		if i%2 == 1 {
			wf = "nightly"
		}
		e.addRun(wf, st, "o/app", base.Add(time.Duration(i)*time.Minute))
	}
	e.addRun("ci", status.RunRunning, "o/other", base.Add(time.Hour))

	code, m := e.get("/api/v1/admin/runs")
	runs := m["runs"].([]any)
	if code != 200 || len(runs) != 20 || m["total"].(float64) != 26 || m["limit"].(float64) != 20 || m["offset"].(float64) != 0 {
		t.Fatalf("default page: %d total=%v limit=%v n=%d", code, m["total"], m["limit"], len(runs))
	}
	first := runs[0].(map[string]any)
	if first["repoIdentifier"] != "o/other" || first["status"] != "running" {
		t.Fatalf("newest first: %v", first)
	}
	for _, k := range []string{"runId", "workflowName", "status", "provider", "repoIdentifier", "ref", "sha", "startedAt", "completedAt", "durationMs", "triggeredBy", "failureReason", "createdAt", "deliveryId"} {
		if _, ok := first[k]; !ok {
			t.Errorf("run lacks %q", k)
		}
	}
	// Pagination and the limit cap.
	_, m = e.get("/api/v1/admin/runs?limit=500&offset=20")
	if m["limit"].(float64) != 100 || len(m["runs"].([]any)) != 6 || m["offset"].(float64) != 20 {
		t.Fatalf("cap/offset: limit=%v n=%d", m["limit"], len(m["runs"].([]any)))
	}
	// Filters.
	_, m = e.get("/api/v1/admin/runs?status=failed,failed&workflowName=ci")
	if m["total"].(float64) != 3 { // i = 0, 10, 20
		t.Fatalf("status+workflow total %v", m["total"])
	}
	_, m = e.get("/api/v1/admin/runs?repo=o/other")
	if m["total"].(float64) != 1 {
		t.Fatalf("repo total %v", m["total"])
	}
	_, m = e.get("/api/v1/admin/runs?status=queued") // job-only status: valid, no rows
	if m["total"].(float64) != 0 {
		t.Fatalf("queued total %v", m["total"])
	}
	_, m = e.get("/api/v1/admin/runs?since=" + base.Add(20*time.Minute).Format(time.RFC3339))
	if m["total"].(float64) != 5 { // i = 21..24 and the running one
		t.Fatalf("since total %v", m["total"])
	}
	_, m = e.get("/api/v1/admin/runs?deliveryId=generic:o:s:nightly")
	if m["total"].(float64) != 12 {
		t.Fatalf("delivery total %v", m["total"])
	}
	// Count mode.
	code, m = e.get("/api/v1/admin/runs?count=true&status=failed&repo=o/app")
	if code != 200 || m["total"].(float64) != 5 || m["status"] != "failed" || m["repo"] != "o/app" || m["since"] != nil || m["workflowName"] != nil || m["runs"] != nil {
		t.Fatalf("count: %v", m)
	}
	// Validation.
	for q, want := range map[string]string{
		"status=bogus":    "Invalid status \"bogus\" (allowed: pending, running, held, cancelling, success, failed, cancelled, queued",
		"since=yesterday": "Invalid since",
		"limit=0":         "Invalid limit",
		"limit=x":         "Invalid limit",
		"offset=-1":       "Invalid offset",
	} {
		code, m = e.get("/api/v1/admin/runs?" + q)
		if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("%s: %d %v", q, code, m)
		}
	}
}

func TestRunJobsStepsLogs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	run, jobs := e.addRun("ci", status.RunRunning, "o/app", now, "build", "test")
	reason := "no agent online"
	if _, err := e.st.UpdateJobStatus(ctx, jobs[1].ID, nil, status.JobQueued, store.JobUpdate{PendingReason: &reason}); err != nil {
		t.Fatal(err)
	}
	agent := "agent-1"
	if _, err := e.st.UpdateJobStatus(ctx, jobs[0].ID, nil, status.JobRunning, store.JobUpdate{AgentID: &agent, StartedAt: &now}); err != nil {
		t.Fatal(err)
	}
	exit := 0
	dur := int64(1200)
	for _, s := range []*store.Step{
		{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 0, StepName: "Checkout", Status: status.StepSuccess, ExitCode: &exit, DurationMs: &dur, StartedAt: &now, CompletedAt: &now},
		{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 1, StepName: "Test", Status: status.StepRunning, StartedAt: &now},
	} {
		if err := e.st.UpsertStep(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	code, m := e.get("/api/v1/admin/runs/" + run.ID)
	if code != 200 || m["run"].(map[string]any)["runId"] != run.ID {
		t.Fatalf("get run: %d %v", code, m)
	}
	code, m = e.get("/api/v1/admin/runs/" + uuid.NewString())
	if code != 404 || m["error"] != "Run not found" {
		t.Fatalf("missing run: %d %v", code, m)
	}

	code, m = e.get("/api/v1/admin/runs/" + run.ID + "/jobs")
	js := m["jobs"].([]any)
	if code != 200 || len(js) != 2 {
		t.Fatalf("jobs: %d %v", code, m)
	}
	j0, j1 := js[0].(map[string]any), js[1].(map[string]any)
	for _, k := range []string{"jobId", "jobName", "status", "matrixValues", "agentId", "startedAt", "completedAt", "durationMs", "errorMessage", "routingReason", "runsOnLabels", "createdAt", "needs"} {
		if _, ok := j0[k]; !ok {
			t.Errorf("job lacks %q", k)
		}
	}
	if _, ok := j0["steps"]; ok {
		t.Error("steps without includeSteps")
	}
	if j0["agentId"] != "agent-1" || j1["routingReason"] != "no agent online" || j1["status"] != "queued" {
		t.Fatalf("job fields: %v / %v", j0, j1)
	}
	if needs := j1["needs"].([]any); len(needs) != 1 || needs[0].(map[string]any)["name"] != "build" {
		t.Fatalf("needs: %v", j1["needs"])
	}
	_, m = e.get("/api/v1/admin/runs/" + run.ID + "/jobs?includeSteps=true")
	steps := m["jobs"].([]any)[0].(map[string]any)["steps"].([]any)
	if len(steps) != 2 || steps[0].(map[string]any)["stepName"] != "Checkout" || steps[0].(map[string]any)["durationMs"].(float64) != 1200 {
		t.Fatalf("steps: %v", steps)
	}
	if s1 := m["jobs"].([]any)[1].(map[string]any)["steps"].([]any); len(s1) != 0 {
		t.Fatalf("job without steps: %v", s1)
	}

	// Logs: 7 lines in step 1 (running), 2 in step 0 (success).
	var lines []protocol.LogLine
	for i := 0; i < 7; i++ {
		lines = append(lines, protocol.LogLine{Timestamp: int64(1000 + i), Stream: protocol.StreamStdout, Text: fmt.Sprintf("line %d", i)})
	}
	if err := e.logs.Append(run.ID, jobs[0].ID, 1, lines); err != nil {
		t.Fatal(err)
	}
	if err := e.logs.Append(run.ID, jobs[0].ID, 0, lines[:2]); err != nil {
		t.Fatal(err)
	}
	logs := "/api/v1/admin/runs/" + run.ID + "/jobs/" + jobs[0].ID + "/steps/"
	code, m = e.get(logs + "1/logs?limit=3")
	if code != 200 || len(m["lines"].([]any)) != 3 || m["nextCursor"].(float64) != 3 || m["complete"] != false {
		t.Fatalf("page 1: %d %v", code, m)
	}
	l0 := m["lines"].([]any)[0].(map[string]any)
	if l0["ts"].(float64) != 1000 || l0["stream"] != "stdout" || l0["msg"] != "line 0" {
		t.Fatalf("line shape: %v", l0)
	}
	_, m = e.get(logs + "1/logs?limit=3&cursor=6")
	if len(m["lines"].([]any)) != 1 || m["nextCursor"].(float64) != 7 || m["complete"] != false {
		t.Fatalf("last page of a running step: %v", m)
	}
	_, m = e.get(logs + "0/logs")
	if len(m["lines"].([]any)) != 2 || m["complete"] != true {
		t.Fatalf("terminal step: %v", m)
	}
	_, m = e.get(logs + "-1/logs") // setup bucket, empty, job running
	if len(m["lines"].([]any)) != 0 || m["nextCursor"].(float64) != 0 || m["complete"] != false {
		t.Fatalf("setup bucket: %v", m)
	}
	// Job finishes ⇒ every stream complete at its end.
	done := time.Now().UTC()
	if _, err := e.st.UpdateJobStatus(ctx, jobs[0].ID, nil, status.JobSuccess, store.JobUpdate{CompletedAt: &done}); err != nil {
		t.Fatal(err)
	}
	_, m = e.get(logs + "1/logs?cursor=7")
	if m["complete"] != true {
		t.Fatalf("after job end: %v", m)
	}
	other, otherJobs := e.addRun("ci", status.RunRunning, "o/app", now, "build")
	for path, want := range map[string]int{
		logs + "x/logs":           400,
		logs + "-3/logs":          400,
		logs + "1/logs?cursor=-1": 400,
		"/api/v1/admin/runs/" + run.ID + "/jobs/" + uuid.NewString() + "/steps/0/logs":     404,
		"/api/v1/admin/runs/" + run.ID + "/jobs/" + jobs[1].ID + "/steps/0/logs":           200,
		"/api/v1/admin/runs/" + uuid.NewString() + "/jobs/" + jobs[0].ID + "/steps/0/logs": 404,
		"/api/v1/admin/runs/" + uuid.NewString() + "/jobs":                                 404,
	} {
		if code, m := e.get(path); code != want {
			t.Errorf("%s: %d %v, want %d", path, code, m, want)
		}
	}
	// Which of the two is missing, said as it is: the run before the job,
	// and a job of another run is not this run's.
	for path, want := range map[string]string{
		"/api/v1/admin/runs/" + run.ID + "/jobs/" + uuid.NewString() + "/steps/0/logs":           "Job not found",
		"/api/v1/admin/runs/" + run.ID + "/jobs/" + otherJobs[0].ID + "/steps/0/logs":            "Job not found",
		"/api/v1/admin/runs/" + other.ID + "/jobs/" + jobs[0].ID + "/steps/0/logs":               "Job not found",
		"/api/v1/admin/runs/" + uuid.NewString() + "/jobs/" + jobs[0].ID + "/steps/0/logs":       "Run not found",
		"/api/v1/admin/runs/" + uuid.NewString() + "/jobs/" + uuid.NewString() + "/steps/0/logs": "Run not found",
	} {
		if code, m := e.get(path); code != 404 || m["error"] != want {
			t.Errorf("%s: %d %v, want 404 %q", path, code, m, want)
		}
	}
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	return dir
}

func TestGenericSources(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t)
	body := fmt.Sprintf(`{"orgId":"demo","name":"app","providerType":"local","localConfig":{"path":%q}}`, repo)
	code, m, _ := e.do("POST", "/api/v1/admin/generic-sources", e.owner, body)
	if code != 201 {
		t.Fatalf("create: %d %v", code, m)
	}
	src := m["source"].(map[string]any)
	id := src["id"].(string)
	if src["routingKey"] != "generic:demo:"+id || src["providerType"] != "local" || src["verificationMethod"] != "hmac_sha256" ||
		src["localConfig"].(map[string]any)["path"] != repo || src["enabled"] != true || src["webhookPath"] != "/webhook/demo/generic/app" {
		t.Fatalf("source: %v", src)
	}
	if _, ok := src["webhookSecret"]; ok {
		t.Fatal("secret in create response")
	}
	// Conflict.
	code, m, _ = e.do("POST", "/api/v1/admin/generic-sources", e.owner, body)
	if code != 409 || !strings.Contains(m["error"].(string), "already exists") {
		t.Fatalf("conflict: %d %v", code, m)
	}
	// Same name in another org is fine; generic provider.
	code, m, _ = e.do("POST", "/api/v1/admin/generic-sources", e.owner, `{"orgId":"other","name":"app"}`)
	if code != 201 || m["source"].(map[string]any)["providerType"] != "generic" {
		t.Fatalf("generic: %d %v", code, m)
	}
	// List, filter, get.
	_, m = e.get("/api/v1/admin/generic-sources")
	if n := len(m["sources"].([]any)); n != 2 {
		t.Fatalf("list: %v", m)
	}
	if strings.Contains(fmt.Sprint(m), "ecret") {
		t.Fatalf("secret leaked in list: %v", m)
	}
	_, m = e.get("/api/v1/admin/generic-sources?orgId=demo")
	if n := len(m["sources"].([]any)); n != 1 {
		t.Fatalf("filtered list: %v", m)
	}
	code, m = e.get("/api/v1/admin/generic-sources/" + id)
	if code != 200 || m["source"].(map[string]any)["name"] != "app" {
		t.Fatalf("get: %d %v", code, m)
	}
	code, m = e.get("/api/v1/admin/generic-sources/" + uuid.NewString())
	if code != 404 || m["error"] != "Source not found" {
		t.Fatalf("get missing: %d %v", code, m)
	}
	code, m = e.get("/api/v1/admin/generic-sources/" + id + "/webhook-secret")
	secret, _ := m["webhookSecret"].(string)
	if code != 200 || len(secret) != 64 {
		t.Fatalf("secret: %d %v", code, m)
	}
	stored, _ := e.st.GetSource(context.Background(), id)
	if stored.WebhookSecret != secret || stored.LocalPath != repo {
		t.Fatalf("stored: %+v", stored)
	}

	// Validation.
	notRepo := t.TempDir()
	for b, want := range map[string]string{
		`{"orgId":"demo","name":"x","bogus":1}`: `unknown field "bogus"`,
		`{"orgId":"demo","name":"x"} {}`:        "unexpected data",
		`not json`:                              "Invalid JSON body",
		``:                                      "empty body",
		`{"name":"x"}`:                          "orgId is required",
		`{"orgId":"demo"}`:                      "name is required",
		`{"orgId":"demo","name":"Bad Name"}`:    `Invalid name "Bad Name"`,
		`{"orgId":"demo","name":".."}`:          `Invalid name ".."`,
		`{"orgId":"demo","name":"-x"}`:          `Invalid name "-x"`,
		`{"orgId":"..","name":"x"}`:             `Invalid orgId ".."`,
		`{"orgId":"demo","name":"x","idempotencyKeyHeader":"Bad Header"}`:                                            "not a valid header name",
		`{"orgId":"demo","name":"x","idempotencyKeyHeader":"X-Id","idempotencyKeyPath":"$.id"}`:                      "not both",
		`{"orgId":"demo","name":"x","idempotencyKeyPath":"$[?(@.a ==)]"}`:                                            "idempotencyKeyPath",
		`{"orgId":"demo","name":"x","providerType":"local","idempotencyKeyPath":"$.id","localConfig":{"path":"/x"}}`: "only allowed with providerType",
		`{"orgId":"demo","name":"x","providerType":"github"}`:                                                        `Invalid providerType "github"`,
		`{"orgId":"demo","name":"x","verificationMethod":"rsa"}`:                                                     "not supported",
		`{"orgId":"demo","name":"x","providerType":"local"}`:                                                         "localConfig.path is required",
		`{"orgId":"demo","name":"x","providerType":"local","localConfig":{"path":"rel"}}`:                            "must be absolute",
		fmt.Sprintf(`{"orgId":"demo","name":"x","providerType":"local","localConfig":{"path":%q}}`, notRepo):         "is not a git repository",
		fmt.Sprintf(`{"orgId":"demo","name":"x","localConfig":{"path":%q}}`, repo):                                   "only allowed with providerType",
	} {
		code, m, _ := e.do("POST", "/api/v1/admin/generic-sources", e.owner, b)
		if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("body %q: %d %v, want %q", b, code, m, want)
		}
	}
}

func TestBodyCap(t *testing.T) {
	e := newEnv(t)
	big := `{"orgId":"` + strings.Repeat("a", MaxBodyBytes) + `","name":"x"}`
	code, m, _ := e.do("POST", "/api/v1/admin/generic-sources", e.owner, big)
	if code != 413 || !strings.Contains(m["error"].(string), "too large") {
		t.Fatalf("cap: %d %v", code, m)
	}
}

func TestRoutesListed(t *testing.T) {
	// Every route in Routes is served (not 404) and documented.
	e := newEnv(t)
	doc := readDoc(t)
	for _, r := range Routes {
		parts := strings.Fields(r)
		path := strings.NewReplacer("{id}", "x", "{runId}", "x", "{jobId}", "x", "{i}", "0").Replace(parts[1])
		code, m, _ := e.do(parts[0], path, "", "")
		if code == 404 && m["error"] == "Not found" {
			t.Errorf("%s: not routed", r)
		}
		if !strings.Contains(doc, "| "+parts[0]+" | `"+parts[1]+"` | `"+parts[2]+"` |") {
			t.Errorf("docs/admin-api.md lacks the row for %s", r)
		}
	}
}

// Asking for the logs of a step the job does not have is a 404 that says
// which steps exist, not an empty, "complete" page.
func TestLogsOfAStepTheJobDoesNotHave(t *testing.T) {
	e := newEnv(t)
	run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", Status: status.RunRunning, OrgID: "o", CreatedAt: time.Now()}
	job := &store.Job{ID: uuid.NewString(), RunID: run.ID, JobName: "build", BaseJobName: "build", Status: status.JobRunning, CreatedAt: time.Now(),
		Config: json.RawMessage(`{"name":"build","steps":[{"name":"a","run":"true"},{"name":"b","run":"true"}]}`)}
	if err := e.st.CreateRun(context.Background(), run, []*store.Job{job}); err != nil {
		t.Fatal(err)
	}
	base := "/api/v1/admin/runs/" + run.ID + "/jobs/" + job.ID + "/steps/"
	if code, m := e.get(base + "1/logs"); code != 200 {
		t.Errorf("existing step 1: %d %v", code, m)
	}
	if code, m := e.get(base + "2/logs"); code != 404 || !strings.Contains(fmt.Sprint(m["error"]), "has 2 steps") {
		t.Errorf("missing step 2: %d %v", code, m)
	}
}
