package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// forkRun adds a fork pull request run held by the trust policy (a
// workflow-scoped fork_pr hold, as approval.Gate makes it) whose delivery
// is a GitHub pull_request payload; it returns the run and the hold.
func (h *harness) forkRun(t *testing.T) (*store.Run, *store.HeldRun) {
	t.Helper()
	ctx := context.Background()
	payload, _ := json.Marshal(map[string]any{
		"action": "opened", "number": 42,
		"pull_request": map[string]any{"number": 42, "title": "Speed up <b>parser</b>",
			"html_url": "https://github.com/demo/app/pull/42", "user": map[string]any{"login": "forker"},
			"head": map[string]any{"repo": map[string]any{"full_name": "forker/app", "html_url": "https://github.com/forker/app"}}},
		"sender": map[string]any{"login": "forker"}})
	del := &store.Delivery{ID: "github:demo:src-1:pr42", SourceID: "src-1", OrgID: "demo", Event: "pull_request", Payload: payload,
		Status: store.DeliveryReceived, ReceivedAt: time.Now().UTC()}
	if err := h.st.InsertDelivery(ctx, del); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	run := &store.Run{ID: "33333333-3333-3333-3333-333333333333", WorkflowName: "ci", Status: status.RunHeld, Provider: provider.GitHub,
		RepoIdentifier: "demo/app", Ref: "refs/pull/42/head", SHA: strings.Repeat("b", 40), DeliveryID: del.ID, SourceID: "src-1",
		OrgID: "demo", TriggerType: apitypes.TriggerPullRequest, TargetBranch: "main", TrustTier: store.TrustUnknown, CreatedAt: now}
	if err := h.st.CreateRun(ctx, run, []*store.Job{{ID: "44444444-0000-0000-0000-000000000001", RunID: run.ID, JobName: "test",
		BaseJobName: "test", Status: status.JobHeld, Config: json.RawMessage(`{"steps":[{"name":"go test"}]}`), CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	held := &store.HeldRun{ID: "hold-fork-42", OrgID: "demo", RunID: run.ID, HoldType: hold.Security, QueueType: hold.QueueSecurity,
		HoldScope: hold.ScopeWorkflow, Reason: hold.ReasonForkPR, Clauses: []store.ApprovalClause{}, ExpiresAt: now.Add(time.Hour)}
	if ok, err := h.st.CreateHeldRun(ctx, held, nil); err != nil || !ok {
		t.Fatalf("hold: %v %v", ok, err)
	}
	return run, held
}

// A reviewer sees who opened a held fork pull request, from which fork,
// its title and links to it and its changed files, on the held runs page
// and on the run page, and decides on the run page itself.
func TestHeldForkRunShowsPullRequestAndDecidesOnRunPage(t *testing.T) {
	h := newHarness(t)
	run, held := h.forkRun(t)
	c := h.client()
	csrf := c.signIn(h.tokens[auth.RoleAdmin])
	want := []string{`#42 Speed up &lt;b&gt;parser&lt;/b&gt;`, `href="https://github.com/demo/app/pull/42"`,
		`<strong class="pr-author">forker</strong>`, `<a href="https://github.com/forker/app" rel="noreferrer noopener">forker/app</a>`,
		`href="https://github.com/demo/app/pull/42/files"`, "Files changed", "pull request from a fork (fork_pr)"}
	_, body, _ := c.get("/ui/held")
	mustContain(t, "held page", body, want...)
	_, body, _ = c.get("/ui/runs/" + run.ID)
	mustContain(t, "run page", body, want...)
	mustContain(t, "run page", body, `action="/ui/held/`+held.ID+`/decision"`, `name="back" value="run"`, `value="approve"`, `value="reject"`)
	mustNotContain(t, "run page", body, "Approve or reject on the held runs page")

	code, _, resp := c.post("/ui/held/"+held.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "back": {"run"}})
	if code != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs/"+run.ID+"?flash=approved" {
		t.Fatalf("approve from the run page: %d %s", code, resp.Header.Get("Location"))
	}
	if got, _ := h.st.GetHeldRun(context.Background(), held.ID); got.Status != hold.Approved {
		t.Fatalf("hold after approval on the run page: %s", got.Status)
	}
}

// An auditor sees the pull request but no decision buttons on the run
// page.
func TestRunPageOffersNoDecisionToAuditor(t *testing.T) {
	h := newHarness(t)
	run, _ := h.forkRun(t)
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get("/ui/runs/" + run.ID)
	mustContain(t, "auditor run page", body, `#42 Speed up`, "forker/app", "Your role cannot decide these holds")
	mustNotContain(t, "auditor run page", body, `value="approve"`, `value="reject"`)
}

func TestPullFromPayloadShapes(t *testing.T) {
	gl := pullFromPayload(json.RawMessage(`{"object_kind":"merge_request","user":{"username":"eve"},
		"object_attributes":{"iid":7,"title":"MR","url":"https://gitlab.example/g/p/-/merge_requests/7",
		"source":{"path_with_namespace":"eve/p","web_url":"https://gitlab.example/eve/p"}}}`))
	if gl.Number != 7 || gl.Author != "eve" || gl.HeadRepo != "eve/p" || gl.DiffURL != "https://gitlab.example/g/p/-/merge_requests/7/diffs" {
		t.Errorf("GitLab merge request = %+v", gl)
	}
	bad := pullFromPayload(json.RawMessage(`{"pull_request":{"number":1,"html_url":"javascript:alert(1)","head":{"repo":{"full_name":"x/y","html_url":"data:text/html,x"}}}}`))
	if bad.URL != "" || bad.DiffURL != "" || bad.HeadRepoURL != "" {
		t.Errorf("non-web links kept: %+v", bad)
	}
	if gone := pullFromPayload(json.RawMessage(`{"pull_request":{"number":2,"head":{"repo":null}}}`)); gone.HeadRepo != "(deleted fork)" {
		t.Errorf("deleted fork = %+v", gone)
	}
	if push := pullFromPayload(json.RawMessage(`{"head_commit":{"message":"x"}}`)); push.Number != 0 {
		t.Errorf("push read as a pull request: %+v", push)
	}
}

var selectedStepRe = regexp.MustCompile(`<li class="on" aria-current="step" data-step="(-?\d+)">`)

// selectedStep returns the step index the job page opened on.
func selectedStep(t *testing.T, body string) string {
	t.Helper()
	m := selectedStepRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no selected step in the job page")
	}
	return m[1]
}

// A running job opens on its running step, with its set-up finished; a
// failed job opens on its failed step.
func TestJobPageOpensOnRunningOrFailingStep(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(0))
	if got := selectedStep(t, body); got != "0" {
		t.Errorf("running job opened on step %s, want 0 (the running step)", got)
	}
	mustContain(t, "running job", body, `data-step="-1"><a href="/ui/runs/`+h.runID+`/jobs/`+h.jobIDs[0]+`?step=-1"><span class="badge st-success">success</span> Set up job`)

	ctx := context.Background()
	now := time.Now().UTC()
	exit := 1
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.st.UpsertStep(ctx, &store.Step{RunID: h.runID, JobID: h.jobIDs[1], StepIndex: 0, StepName: "compile", Status: status.StepSuccess, StartedAt: &now, CompletedAt: &now}))
	must(h.st.UpsertStep(ctx, &store.Step{RunID: h.runID, JobID: h.jobIDs[1], StepIndex: 1, StepName: "test", Status: status.StepFailed, ExitCode: &exit, StartedAt: &now, CompletedAt: &now}))
	if _, err := h.st.UpdateJobStatus(ctx, h.jobIDs[1], nil, status.JobFailed, store.JobUpdate{StartedAt: &now, CompletedAt: &now}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = c.get(h.jobURL(1))
	if got := selectedStep(t, body); got != "1" {
		t.Errorf("failed job opened on step %s, want 1 (the failed step)", got)
	}
}

// A running step and a running job show how long they have been running,
// with their start for live.js to count on.
func TestRunningStepAndJobShowElapsedTime(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	start := h.now.Add(-90 * time.Second).UTC()
	if err := h.st.UpsertStep(ctx, &store.Step{RunID: h.runID, JobID: h.jobIDs[0], StepIndex: 0, StepName: "compile", Status: status.StepRunning, StartedAt: &start}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.UpdateJobStatus(ctx, h.jobIDs[0], nil, status.JobRunning, store.JobUpdate{StartedAt: &start}); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(0))
	since := start.Format(time.RFC3339)
	mustContain(t, "job page", body, `<span class="dur elapsed" data-since="`+since+`">1m 30s</span>`,
		`<span class="elapsed" id="job-elapsed" data-since="`+since+`">1m 30s</span> so far`)
	js, err := assets.ReadFile("static/live.js")
	if err != nil || !strings.Contains(string(js), `querySelectorAll(".elapsed[data-since]")`) {
		t.Errorf("live.js does not count elapsed times on: %v", err)
	}
}

// Per-line timestamps are off by default and shown with ?ts=1, from the
// time the log store keeps for each line.
func TestLogTimestampsToggle(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
	if err := h.logs.Append(h.runID, h.jobIDs[0], 1, []protocol.LogLine{{Timestamp: at.UnixMilli(), Stream: protocol.StreamStdout, Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(0) + "?step=1")
	mustNotContain(t, "default", body, `class="ts"`)
	mustContain(t, "default", body, `id="stamps-toggle">Show timestamps`, `?step=1&amp;ts=1`)
	_, body, _ = c.get(h.jobURL(0) + "?step=1&ts=1")
	mustContain(t, "with timestamps", body, `<td class="ts" title="2026-03-04T05:06:07.89Z">05:06:07.890</td><td class="msg">hello</td>`,
		`data-ts="1"`, `Hide timestamps`)
}

// A log longer than a page shows its line count and links to its first
// and last pages.
func TestPagedLogShowsLineCountAndEnds(t *testing.T) {
	h := newHarness(t)
	lines := make([]protocol.LogLine, 2500)
	for i := range lines {
		lines[i] = protocol.LogLine{Timestamp: 1, Stream: protocol.StreamStdout, Text: fmt.Sprintf("line %d", i+1)}
	}
	if err := h.logs.Append(h.runID, h.jobIDs[0], 1, lines); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(0) + "?step=1")
	mustContain(t, "first page", body, "lines 1–1000 of 2,500", `id="last-page"`, `?from=2000&amp;step=1`, "jump to end")
	mustNotContain(t, "first page", body, `id="first-page"`)
	_, body, _ = c.get(h.jobURL(0) + "?step=1&from=2000")
	mustContain(t, "last page", body, "lines 2001–2500 of 2,500", `id="first-page"`, `id="L2500"`)
	mustNotContain(t, "last page", body, `id="last-page"`)
}

// Search hits are rendered like the log: colours as classes, no escape
// codes.
func TestSearchHitsRenderedLikeLog(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(0) + "?step=0&q=red")
	mustContain(t, "search", body, `<code class="hit">&lt;script&gt;alert(&#39;log&#39;)&lt;/script&gt; <span class="a-f1">red</span></code>`)
	mustNotContain(t, "search", body, "\x1b", "[31m", "␛")
}

// The runs list names each run's commit title (a message's first line, or
// a pull request's title) and who triggered it.
func TestRunsListShowsCommitTitleAndActor(t *testing.T) {
	h := newHarness(t)
	h.forkRun(t)
	ctx := context.Background()
	payload, _ := json.Marshal(map[string]any{"head_commit": map[string]any{"message": "Fix the cache key\n\nLonger body text"},
		"pusher": map[string]any{"name": "bob"}})
	if err := h.st.InsertDelivery(ctx, &store.Delivery{ID: "d-multi", SourceID: "src-1", OrgID: "demo", Event: "push", Payload: payload,
		Status: store.DeliveryReceived, ReceivedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := h.st.CreateRun(ctx, &store.Run{ID: "55555555-5555-5555-5555-555555555555", WorkflowName: "ci", Status: status.RunSuccess,
		Provider: provider.Generic, RepoIdentifier: "demo/app", Ref: "refs/heads/main", SHA: strings.Repeat("c", 40), DeliveryID: "d-multi",
		SourceID: "src-1", OrgID: "demo", TriggerType: apitypes.TriggerPush, CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get("/ui/runs")
	mustContain(t, "runs list", body, "<th>Commit</th>", "<th>Actor</th>",
		`<span class="commit-title">Fix the cache key</span>`, `<td class="actor">bob</td>`,
		`<span class="commit-title">Speed up &lt;b&gt;parser&lt;/b&gt;</span>`, `<td class="actor">forker</td>`,
		`<span class="commit-title">fix: &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;</span>`, `<td class="actor">mallory&lt;b&gt;</td>`,
		`<div class="scroll" id="runs-scroll">`)
	mustNotContain(t, "runs list", body, "Longer body text")
}

// fakeRerun records reruns; a partial rerun is marked "failed".
type fakeRerun struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeRerun) Rerun(ctx context.Context, runID, by string) (*store.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "all "+runID)
	return &store.Run{ID: "rerun-all"}, nil
}

func (f *fakeRerun) RerunFailed(ctx context.Context, runID, by string) (*store.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "failed "+runID)
	return &store.Run{ID: "rerun-failed"}, nil
}

// A failed run offers "Re-run failed jobs", which makes a partial rerun;
// a rerun links to the run it repeats and that run to its reruns.
func TestRerunFailedJobsAndRerunLinks(t *testing.T) {
	rr := &fakeRerun{}
	h := newHarness(t, func(d *Deps) { d.Rerun = rr })
	ctx := context.Background()
	now := time.Now().UTC()
	mk := func(id string, st status.Run) {
		if err := h.st.CreateRun(ctx, &store.Run{ID: id, WorkflowName: "ci", Status: st, Provider: provider.Generic, RepoIdentifier: "demo/app",
			Ref: "refs/heads/main", SHA: strings.Repeat("d", 40), SourceID: "src-1", OrgID: "demo", TriggerType: apitypes.TriggerPush, CreatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
	}
	parent, child := "66666666-6666-6666-6666-666666666666", "77777777-7777-7777-7777-777777777777"
	mk(parent, status.RunFailed)
	mk(child, status.RunSuccess)
	if err := h.st.InsertRunLink(ctx, &store.RunLink{RunID: child, ParentRunID: parent, OriginalRunID: parent}); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	csrf := c.signIn(h.tokens[auth.RoleAdmin])
	_, body, _ := c.get("/ui/runs/" + parent)
	mustContain(t, "failed run", body, `id="rerun-failed"`, `name="failed" value="true"`, "Re-run failed jobs",
		`Rerun as <a href="/ui/runs/`+child+`" class="child-run">run `+child[:12]+`</a>`)
	_, body, _ = c.get("/ui/runs/" + child)
	mustContain(t, "rerun", body, `Rerun of <a href="/ui/runs/`+parent+`" id="parent-run">`)
	mustNotContain(t, "successful run", body, `id="rerun-failed"`)

	code, _, resp := c.post("/ui/runs/"+parent+"/rerun", url.Values{"csrf": {csrf}, "failed": {"true"}})
	if code != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs/rerun-failed?flash=rerun" {
		t.Fatalf("re-run failed jobs: %d %s", code, resp.Header.Get("Location"))
	}
	if code, _, _ := c.post("/ui/runs/"+parent+"/rerun", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("rerun: %d", code)
	}
	if got := strings.Join(rr.calls, "; "); got != "failed "+parent+"; all "+parent {
		t.Errorf("reruns = %q", got)
	}
}

// The graph is as wide as its last column and shows matrix legs' full
// names.
func TestGraphFitsLastColumnAndFullLegNames(t *testing.T) {
	legs := []string{"test (1.22, linux, amd64, race)", "test (1.23, windows, arm64, norace)"}
	jobs := []*store.Job{{ID: "a", JobName: "build"}}
	for i, n := range legs {
		jobs = append(jobs, &store.Job{ID: fmt.Sprint("leg", i), JobName: n, BaseJobName: "test", Needs: []store.Need{{Upstream: "build"}}})
	}
	jobs = append(jobs, &store.Job{ID: "z", JobName: "deploy", Needs: []store.Need{{Upstream: "test"}}})
	g := layoutGraph("r", jobs)
	for _, n := range g.Nodes {
		if n.X+n.W+pad > g.W {
			t.Errorf("node %q ends at %d, past the graph's width %d", n.Name, n.X+n.W, g.W)
		}
		if n.Label != n.Name {
			t.Errorf("label %q, want the full name %q", n.Label, n.Name)
		}
		if n.W < len(n.Name)*labelCharW+durRoom {
			t.Errorf("box of %q is %d wide, too narrow for its name", n.Name, n.W)
		}
	}
}

// A skipped job's page reads "skipped" for its duration, not 0ms.
func TestSkippedJobPageReadsSkipped(t *testing.T) {
	h := newHarness(t)
	zero := int64(0)
	now := time.Now().UTC()
	if _, err := h.st.UpdateJobStatus(context.Background(), h.jobIDs[2], nil, status.JobSkipped, store.JobUpdate{CompletedAt: &now, DurationMs: &zero}); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(2))
	mustContain(t, "skipped job", body, "<dt>Duration</dt><dd>skipped</dd>")
	mustNotContain(t, "skipped job", body, "<dd>0ms</dd>")
}

// A job page opened without ?step follows the job: tailing its running
// step, or, between two steps, looking again for the next ("await-step");
// a page opened on a chosen finished step stays put.
func TestJobPageWithoutStepFollowsTheJob(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(0))
	mustContain(t, "running step", body, `data-live="tail"`)
	now := time.Now().UTC()
	if err := h.st.UpsertStep(context.Background(), &store.Step{RunID: h.runID, JobID: h.jobIDs[0], StepIndex: 0, StepName: "compile",
		Status: status.StepSuccess, StartedAt: &now, CompletedAt: &now}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.UpdateJobStatus(context.Background(), h.jobIDs[0], nil, status.JobRunning, store.JobUpdate{StartedAt: &now}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = c.get(h.jobURL(0))
	mustContain(t, "between steps", body, `data-live="await-step"`)
	_, body, _ = c.get(h.jobURL(0) + "?step=0")
	mustContain(t, "chosen finished step", body, `data-live=""`)
}
