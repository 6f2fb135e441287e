package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

func TestLogPagesAnchorsSearchAndRaw(t *testing.T) {
	h := newHarness(t)
	job := h.jobIDs[1]
	var lines []protocol.LogLine
	for i := 1; i <= 2500; i++ {
		lines = append(lines, protocol.LogLine{Timestamp: int64(i), Stream: protocol.StreamStdout, Text: fmt.Sprintf("line %d", i)})
	}
	if err := h.logs.Append(h.runID, job, 0, lines); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	page := h.jobURL(1) + "?step=0"
	_, body, _ := c.get(page)
	if n := strings.Count(body, `<tr id="L`); n != logPageSize {
		t.Fatalf("first page: %d lines", n)
	}
	mustContain(t, "first page", body, `<tr id="L1" class="stdout">`, `id="L1000"`, `rel="next"`, "from=1000")
	mustNotContain(t, "first page", body, `id="L1001"`, `rel="prev"`)
	_, body, _ = c.get(page + "&from=2000")
	if n := strings.Count(body, `<tr id="L`); n != 500 {
		t.Fatalf("last page: %d lines", n)
	}
	mustContain(t, "last page", body, `id="L2001"`, `id="L2500"`, `rel="prev"`)
	mustNotContain(t, "last page", body, `rel="next"`)

	code, _, resp := c.get(page + "&line=1500")
	if code != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "?from=1000&step=0#L1500") {
		t.Fatalf("?line=1500: %d %s", code, resp.Header.Get("Location"))
	}
	_, body, _ = c.get(page + "&q=line+250")
	// "line 250" matches lines 250 and 2500.
	mustContain(t, "search", body, "2 matching lines", "#L250\"", "from=2000&amp;step=0#L2500")

	code, raw, resp := c.get(fmt.Sprintf("/ui/runs/%s/jobs/%s/steps/0/raw", h.runID, job))
	if code != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("raw: %d %v", code, resp.Header)
	}
	if got := strings.Count(raw, "\n"); got != 2500 || !strings.HasPrefix(raw, "line 1\nline 2\n") || !strings.HasSuffix(raw, "line 2500\n") {
		t.Fatalf("raw log: %d lines", got)
	}
}

func TestRenderANSI(t *testing.T) {
	for in, want := range map[string]string{
		"plain <b>":                       "plain &lt;b&gt;",
		"\x1b[1;31merr\x1b[0m ok":         `<span class="a-f1 a-bold">err</span> ok`,
		"\x1b[92mgreen\x1b[39m":           `<span class="a-f10">green</span>`,
		"\x1b[38;5;4mblue\x1b[38;5;200mx": `<span class="a-f4">blue</span>x`,
		"\x1b]0;title\x07after":           "after",
		"a\x1b[2Kb\rc\x00d\te":            "abcd\te",
		"\x1b[31m<script>\x1b[0m":         `<span class="a-f1">&lt;script&gt;</span>`,
		"\x1b[31m":                        "",
	} {
		if got := string(renderANSI(in)); got != want {
			t.Errorf("renderANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestJobDurSkipped checks that a skipped job reads "skipped" rather than
// the 0ms it was recorded with, and that other jobs keep their duration.
func TestJobDurSkipped(t *testing.T) {
	zero, ms := int64(0), int64(1500)
	if got := jobDur(status.JobSkipped, &zero); got != "skipped" {
		t.Fatalf("skipped job shows %q, want skipped", got)
	}
	if got := jobDur(status.JobSuccess, &ms); got != "1.5s" {
		t.Fatalf("successful job shows %q, want 1.5s", got)
	}
}

// TestFmtAgo checks the runs list's relative times.
func TestFmtAgo(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := fmtAgo(now.Add(-3*time.Minute), now); got != "3 minutes ago" {
		t.Fatalf("3 minutes before shows %q", got)
	}
	if got := fmtAgo(time.Time{}, now); got != "" {
		t.Fatalf("zero time shows %q, want empty", got)
	}
}

// TestContainerBuildIsItsOwnStep: a job whose container is built from a
// Dockerfile lists "Build container image" as a step of its own, after
// the setup and before the job's steps, with its status, duration and
// log (page and raw download), apart from the setup log.
func TestContainerBuildIsItsOwnStep(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now().UTC()
	run, err := h.st.GetRun(ctx, h.runID)
	if err != nil {
		t.Fatal(err)
	}
	run.ID = "11111111-1111-1111-1111-111111111119"
	job := &store.Job{ID: "22222222-0000-0000-0000-000000000009", RunID: run.ID, JobName: "image", BaseJobName: "image",
		Status: status.JobRunning, CreatedAt: now, StartedAt: &now,
		Config: json.RawMessage(`{"container":{"build":{"context":"ci","dockerfile":"Dockerfile"}},"steps":[{"name":"test"}]}`)}
	if err := h.st.CreateRun(ctx, run, []*store.Job{job}); err != nil {
		t.Fatal(err)
	}
	dur := int64(4200)
	if err := h.st.UpsertStep(ctx, &store.Step{RunID: run.ID, JobID: job.ID, StepIndex: protocol.ContainerBuildStepIndex,
		StepName: protocol.ContainerBuildStepName, Status: status.StepSuccess, DurationMs: &dur, CompletedAt: &now}); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.logs.Append(run.ID, job.ID, protocol.ContainerBuildStepIndex, []protocol.LogLine{{Timestamp: 1, Text: "build: Step 1/3 : FROM base"}}))
	must(h.logs.Append(run.ID, job.ID, protocol.JobLogStepIndex, []protocol.LogLine{{Timestamp: 1, Text: "Checked out abc"}}))
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	base := "/ui/runs/" + run.ID + "/jobs/" + job.ID
	code, body, _ := c.get(base + "?step=-2")
	if code != http.StatusOK {
		t.Fatalf("GET ?step=-2: %d", code)
	}
	mustContain(t, "build step", body, "Build container image", "build: Step 1/3 : FROM base", "?step=-2")
	if i, j, k := strings.Index(body, "Set up job"), strings.Index(body, "Build container image"), strings.Index(body, "</span> test</a>"); !(i >= 0 && i < j && j < k) {
		t.Errorf("step list order: setup %d, build %d, test %d", i, j, k)
	}
	mustNotContain(t, "build step", body, "Checked out abc")
	_, setup, _ := c.get(base + "?step=-1")
	mustNotContain(t, "setup log", setup, "build: Step 1/3")
	code, raw, _ := c.get(base + "/steps/-2/raw")
	if code != http.StatusOK || raw != "build: Step 1/3 : FROM base\n" {
		t.Errorf("raw build log: %d %q", code, raw)
	}
	// A job without a built container has no such step.
	if code, _, _ := c.get(h.jobURL(0) + "?step=-2"); code != http.StatusNotFound {
		t.Errorf("?step=-2 of a job without a build: %d, want 404", code)
	}
}

// TestRunPageShowsLibraryDrift: the library drift the pipeline found for
// the run's workflow (the delivery trace's warnings) is shown on the run
// page; another workflow's is not.
func TestRunPageShowsLibraryDrift(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tr := `{"summary":"1 of 1 workflows matched; 1 runs created","warnings":[` +
		`"workflow \"ci\": library drift: library shared ref v1 now resolves to 7d2e01ab93c4; the lock has 4f0c9b2a1d7e (piece shared:p.yaml)",` +
		`"workflow \"other\": library drift not checked: library x (https://x.example/x.git) ref main: unreachable"]}`
	if err := h.st.FinishDelivery(ctx, "generic:demo:src-1:d1", store.DeliveryProcessed, "", json.RawMessage(tr)); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.runURL())
	mustContain(t, "run page", body, "<h2>Warnings</h2>",
		`<p class="warning">library drift: library shared ref v1 now resolves to 7d2e01ab93c4; the lock has 4f0c9b2a1d7e (piece shared:p.yaml)</p>`)
	mustNotContain(t, "run page", body, "x.example")
}
