package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// Markup planted in repository- and log-controlled strings; a page that
// lets any of it through as markup fails the inertness checks.
const (
	evilJob    = "build <img src=x onerror=alert`1`>"
	evilCommit = "fix: <script>alert(1)</script> & <b>bold</b>"
	evilLog    = "<script>alert('log')</script> \x1b[31mred\x1b[0m"
)

// fakeCancel records cancellations (run control needs a dispatcher and
// agents; the e2e tests cover the real one).
type fakeCancel struct {
	mu   sync.Mutex
	runs []string
}

func (f *fakeCancel) CancelRun(ctx context.Context, runID string, force bool, by string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, runID+" by "+by)
	return "cancelling", nil
}

func (f *fakeCancel) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.runs...)
}

var _ = runctl.ErrRunNotFound

type harness struct {
	t       testing.TB
	st      store.Store
	auth    *auth.AdminAuth
	logs    *logstore.FS
	ui      *UI
	srv     *httptest.Server
	cancel  *fakeCancel
	now     time.Time
	nowMu   sync.Mutex
	tokens  map[auth.Role]string // role -> plaintext
	tokenID map[auth.Role]string
	runID   string
	jobIDs  []string
}

func newHarness(t *testing.T, mut ...func(*Deps)) *harness { return newBenchHarness(t, mut...) }

// newBenchHarness is newHarness for tests and benchmarks alike.
func newBenchHarness(t testing.TB, mut ...func(*Deps)) *harness {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	h := &harness{t: t, st: st, auth: auth.NewAdminAuth(st, nil), logs: logstore.NewFS(t.TempDir()),
		cancel: &fakeCancel{}, now: time.Now(), tokens: map[auth.Role]string{}, tokenID: map[auth.Role]string{}}
	for _, role := range []auth.Role{auth.RoleOwner, auth.RoleAdmin, auth.RoleAuditor} {
		plain, tok, err := h.auth.IssueAdminToken(ctx, string(role)+"-token", role, 0)
		if err != nil {
			t.Fatal(err)
		}
		h.tokens[role], h.tokenID[role] = plain, tok.ID
	}
	d := Deps{Store: st, Auth: h.auth, Logs: h.logs, Cancel: h.cancel,
		Approval: approval.NewDecider(st, func() {}), Version: "test",
		Now: func() time.Time { h.nowMu.Lock(); defer h.nowMu.Unlock(); return h.now }}
	for _, m := range mut {
		m(&d)
	}
	var err error
	if h.ui, err = New(d); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.ui.Mount(mux)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	h.seed()
	return h
}

func (h *harness) advance(d time.Duration) {
	h.nowMu.Lock()
	h.now = h.now.Add(d)
	h.nowMu.Unlock()
}

// seed creates a source, a delivery whose commit message carries markup,
// a running run of three jobs (one named with markup) and a step log.
func (h *harness) seed() {
	ctx := context.Background()
	t := h.t
	src := &store.Source{ID: "src-1", OrgID: "demo", Name: "app", Provider: provider.Generic, RoutingKey: "generic:demo:src-1",
		VerificationMethod: "none", Enabled: true, CreatedAt: time.Now().UTC()}
	if err := h.st.CreateSource(ctx, src); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"head_commit": map[string]any{"message": evilCommit, "url": "javascript:alert(1)"},
		"sender": map[string]any{"login": "mallory<b>"}})
	del := &store.Delivery{ID: "generic:demo:src-1:d1", SourceID: src.ID, OrgID: "demo", Event: "push", Payload: payload,
		Status: store.DeliveryReceived, ReceivedAt: time.Now().UTC()}
	if err := h.st.InsertDelivery(ctx, del); err != nil {
		t.Fatal(err)
	}
	h.runID = "11111111-1111-1111-1111-111111111111"
	now := time.Now().UTC()
	run := &store.Run{ID: h.runID, WorkflowName: "ci", Status: status.RunRunning, Provider: provider.Generic, RepoIdentifier: "demo/app",
		Ref: "refs/heads/main", SHA: strings.Repeat("a", 40), DeliveryID: del.ID, SourceID: src.ID, OrgID: "demo",
		TriggerType: apitypes.TriggerPush, TargetBranch: "main", CreatedAt: now, StartedAt: &now}
	cfg := json.RawMessage(`{"steps":[{"name":"compile"},{"name":"test"}]}`)
	jobs := []*store.Job{
		{ID: "22222222-0000-0000-0000-000000000001", RunID: run.ID, JobName: evilJob, BaseJobName: evilJob, Status: status.JobRunning, Config: cfg, CreatedAt: now, StartedAt: &now},
		{ID: "22222222-0000-0000-0000-000000000002", RunID: run.ID, JobName: "test", BaseJobName: "test", Status: status.JobPending, Config: cfg, CreatedAt: now.Add(time.Millisecond),
			Needs: []store.Need{{Upstream: evilJob, RunOn: []status.Job{status.JobSuccess}}}},
		{ID: "22222222-0000-0000-0000-000000000003", RunID: run.ID, JobName: "deploy", BaseJobName: "deploy", Status: status.JobPending, Config: cfg, CreatedAt: now.Add(2 * time.Millisecond),
			Needs: []store.Need{{Upstream: "test", RunOn: []status.Job{status.JobSuccess}}}},
	}
	if err := h.st.CreateRun(ctx, run, jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		h.jobIDs = append(h.jobIDs, j.ID)
	}
	if err := h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 0, StepName: "compile", Status: status.StepRunning, StartedAt: &now}); err != nil {
		t.Fatal(err)
	}
	if err := h.logs.Append(run.ID, jobs[0].ID, 0, []protocol.LogLine{{Timestamp: 1, Stream: protocol.StreamStdout, Text: evilLog}}); err != nil {
		t.Fatal(err)
	}
}

// client is a browser-like client with its own cookie jar.
type client struct {
	h  *harness
	hc *http.Client
}

func (h *harness) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{h: h, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get returns status, body and response.
func (c *client) get(path string) (int, string, *http.Response) {
	c.h.t.Helper()
	resp, err := c.hc.Get(c.h.srv.URL + path)
	if err != nil {
		c.h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

func (c *client) post(path string, form url.Values) (int, string, *http.Response) {
	c.h.t.Helper()
	resp, err := c.hc.PostForm(c.h.srv.URL+path, form)
	if err != nil {
		c.h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

// signIn signs in with token and returns the session's CSRF token.
func (c *client) signIn(token string) string {
	c.h.t.Helper()
	code, body, _ := c.get("/ui/login")
	m := csrfRe.FindStringSubmatch(body)
	if code != 200 || m == nil {
		c.h.t.Fatalf("login page: %d %s", code, body)
	}
	code, body, resp := c.post("/ui/login", url.Values{"csrf": {m[1]}, "token": {token}, "next": {"/ui/runs"}})
	if code != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs" {
		c.h.t.Fatalf("sign in: %d %s", code, body)
	}
	return c.csrf("/ui/runs")
}

func (c *client) csrf(page string) string {
	c.h.t.Helper()
	code, body, _ := c.get(page)
	m := csrfRe.FindStringSubmatch(body)
	if code != 200 || m == nil {
		c.h.t.Fatalf("%s: %d, no csrf token", page, code)
	}
	return m[1]
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}

func mustNotContain(t *testing.T, what, body string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(body, b) {
			t.Errorf("%s: contains %q", what, b)
		}
	}
}

func (h *harness) runURL() string { return "/ui/runs/" + h.runID }
func (h *harness) jobURL(i int) string {
	return fmt.Sprintf("/ui/runs/%s/jobs/%s", h.runID, h.jobIDs[i])
}
