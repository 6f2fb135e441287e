package forgestatus

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/store"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ghErr(status int, hdr http.Header, msg string) error {
	return &ghapi.APIError{Method: "POST", Path: "/repos/a/b/check-runs", StatusCode: status, Header: hdr, Message: msg}
}

// The retry policy: which answers are retried, and when.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		attempts  int
		permanent bool
		wait      time.Duration
	}{
		{"500 backs off", ghErr(500, nil, "boom"), 0, false, time.Second},
		{"502 third attempt", &httpError{status: 502, msg: "bad gateway"}, 2, false, 4 * time.Second},
		{"backoff is capped", ghErr(503, nil, "x"), 30, false, 5 * time.Minute},
		{"429 Retry-After seconds", ghErr(429, http.Header{"Retry-After": {"7"}}, "slow down"), 0, false, 7 * time.Second},
		{"429 Retry-After date", ghErr(429, http.Header{"Retry-After": {t0.Add(90 * time.Second).Format(http.TimeFormat)}}, ""), 0, false, 90 * time.Second},
		{"secondary rate limit", ghErr(403, http.Header{"Retry-After": {"60"}}, "You have exceeded a secondary rate limit"), 0, false, time.Minute},
		{"primary rate limit reset", ghErr(403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(t0.Add(10*time.Minute).Unix(), 10)}}, "API rate limit exceeded"), 0, false, 10*time.Minute + time.Second},
		{"header wait is capped", ghErr(429, http.Header{"Retry-After": {"999999"}}, ""), 0, false, time.Hour},
		{"422 is permanent", ghErr(422, nil, "Invalid request"), 0, true, 0},
		{"403 without limit is permanent", ghErr(403, nil, "Resource not accessible by integration"), 0, true, 0},
		{"404 is permanent", &httpError{status: 404, msg: "not found"}, 0, true, 0},
		{"connection refused retries", errors.New("dial tcp: connection refused"), 1, false, 2 * time.Second},
	} {
		v := classify(tc.err, tc.attempts, t0)
		if v.permanent != tc.permanent {
			t.Errorf("%s: permanent=%v", tc.name, v.permanent)
			continue
		}
		if !tc.permanent && v.next.Sub(t0) != tc.wait {
			t.Errorf("%s: wait %s, want %s", tc.name, v.next.Sub(t0), tc.wait)
		}
	}
}

func job(status status.Job, errMsg string) *store.Job {
	return &store.Job{ID: "j1", RunID: "r1", JobName: "build", Status: status, ErrorMessage: errMsg}
}

// Job states map to check-run states and commit-status states.
func TestOutcomeOf(t *testing.T) {
	run := &store.Run{ID: "r1", WorkflowName: "ci", TriggeredBy: "alice", SHA: strings.Repeat("a", 40)}
	exit1 := 1
	failedStep := []*store.Step{{StepIndex: 0, StepName: "test", Status: status.StepFailed, ExitCode: &exit1}}
	timedStep := []*store.Step{{StepIndex: 0, StepName: "hang", Status: status.StepFailed, ErrorMessage: "step timed out after 1s"}}
	fork := &store.HeldRun{ID: "h1", HoldType: hold.Security, Reason: hold.ReasonForkPR}
	timer := &store.HeldRun{ID: "h2", HoldType: hold.Timer, Contexts: []string{"prod"}, ExpiresAt: t0}
	for _, tc := range []struct {
		job                  *store.Job
		steps                []*store.Step
		hold                 *store.HeldRun
		check, state, gitlab string
		sentence             string
	}{
		{job(status.JobQueued, ""), nil, nil, "queued", "pending", "pending", "queued"},
		{job(status.JobRunning, ""), nil, nil, "in_progress", "pending", "running", "running"},
		{job(status.JobSuccess, ""), nil, nil, "completed/success", "success", "success", "succeeded"},
		{job(status.JobFailed, ""), failedStep, nil, "completed/failure", "failure", "failed", `failed: step "test" exited with 1`},
		{job(status.JobFailed, ""), timedStep, nil, "completed/timed_out", "failure", "failed", "timed out"},
		{job(status.JobFailed, "job_timeout: job exceeded its 1m timeout"), nil, nil, "completed/timed_out", "failure", "failed", "timed out"},
		{job(status.JobTimedOutStale, "no heartbeat"), nil, nil, "completed/timed_out", "failure", "failed", "timed out"},
		{job(status.JobCancelled, ""), nil, nil, "completed/cancelled", "error", "canceled", "cancelled"},
		{job(status.JobSkipped, "upstream_unmet: build (failed)"), nil, nil, "completed/skipped", "error", "skipped", "skipped: upstream_unmet: build"},
		// A `when: on-failure` job after a passing upstream: green.
		{job(status.JobSkipped, "upstream_unmet: publish (success)"), nil, nil, "completed/skipped", "success", "skipped", "skipped: upstream_unmet: publish"},
		// Downstream of a rejected (cancelled) hold: an error, GitLab's skipped.
		{job(status.JobSkipped, "upstream_unmet: test (cancelled)"), nil, nil, "completed/skipped", "error", "skipped", "skipped"},
		{job(status.JobSkipped, ""), nil, nil, "completed/skipped", "success", "skipped", "skipped"},
		{job(status.JobHeld, ""), nil, fork, "completed/action_required", "pending", "pending", "fork pull request from alice waits for approval: comment `/kici approve r1` or run `kici-admin held-run approve h1`"},
		{job(status.JobHeld, ""), nil, timer, "queued", "pending", "pending", "waiting for the wait timer of prod"},
	} {
		v := &jobView{run: run, job: tc.job, steps: tc.steps, hold: tc.hold, now: t0, all: []*store.Job{tc.job}}
		o := outcomeOf(v)
		check := o.status
		if o.conclusion != "" {
			check += "/" + o.conclusion
		}
		if check != tc.check || o.state != tc.state || gitlabState(tc.job, o) != tc.gitlab || !strings.HasPrefix(o.sentence, tc.sentence) {
			t.Errorf("%s %q: check %s state %s gitlab %s sentence %q; want %s %s %s %q", tc.job.Status, tc.job.ErrorMessage,
				check, o.state, gitlabState(tc.job, o), o.sentence, tc.check, tc.state, tc.gitlab, tc.sentence)
		}
		b := statusBody(v, o, "")
		if d := b["description"].(string); len(d) > maxDescription {
			t.Errorf("description over 140 bytes: %q", d)
		}
		if _, ok := b["target_url"]; ok {
			t.Errorf("target_url without a public URL")
		}
	}
}

// Bodies: names, links, and the failing lines.
func TestBodies(t *testing.T) {
	run := &store.Run{ID: "r1", WorkflowName: "ci", SHA: strings.Repeat("b", 40), Status: status.RunFailed}
	j := &store.Job{ID: "j1", RunID: "r1", JobName: "test (1.22, linux)", Status: status.JobFailed}
	v := &jobView{run: run, job: j, all: []*store.Job{j}, now: t0, failStep: "unit", failLines: []string{"ok", "```", "FAIL x"}}
	o := outcomeOf(v)
	b := checkRunBody(v, o, "https://ci.example.com/")
	if b["name"] != "ci / test (1.22, linux)" || b["external_id"] != "j1" || b["details_url"] != "https://ci.example.com/ui/runs/r1/jobs/j1" {
		t.Errorf("check body %v", b)
	}
	text := b["output"].(map[string]any)["text"].(string)
	if !strings.Contains(text, "FAIL x") || strings.Count(text, "```") != 2 {
		t.Errorf("text must fence the lines and keep a ``` line from closing the fence:\n%s", text)
	}
	s := statusBody(v, o, "https://ci.example.com")
	if s["context"] != "kici/ci/test (1.22, linux)" || s["target_url"] != "https://ci.example.com/ui/runs/r1/jobs/j1" {
		t.Errorf("status body %v", s)
	}
	g := gitlabBody(v, o, "")
	if g["name"] != "kici/ci/test (1.22, linux)" || g["state"] != "failed" || g["context"] != nil {
		t.Errorf("gitlab body %v", g)
	}
	long := strings.Repeat("é", 200)
	if got := truncate(long, maxDescription); len(got) > maxDescription || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate: %d bytes", len(got))
	}
}

// The API root of a universal-git source.
func TestAPIRoot(t *testing.T) {
	for tmpl, want := range map[string]string{
		"https://gitea.example.com/{repo}.git":        "https://gitea.example.com",
		"https://host.example/git/{owner}/{name}.git": "https://host.example/git",
		"file:///srv/git/{repo}":                      "",
		"ssh://git@host/{repo}.git":                   "",
	} {
		if got := apiRoot(&store.GitConfig{GitURLTemplate: tmpl}); got != want {
			t.Errorf("%s: %q, want %q", tmpl, got, want)
		}
	}
	if got := apiRoot(&store.GitConfig{GitURLTemplate: "file:///x/{repo}", APIBaseURL: "http://127.0.0.1:3000/"}); got != "http://127.0.0.1:3000" {
		t.Errorf("apiBaseUrl: %q", got)
	}
}

// A skipped job is an error only when an upstream failed, followed through
// a chain of skipped jobs: skipped after an on-failure edge that did not
// fire passes, and so does everything skipped after it.
func TestSkippedThroughAChain(t *testing.T) {
	for _, tc := range []struct {
		upstream *store.Job
		want     string
	}{
		{&store.Job{JobName: "publish", Status: status.JobSkipped, ErrorMessage: "upstream_unmet: build (failed)"}, stateError},
		{&store.Job{JobName: "publish", Status: status.JobSkipped, ErrorMessage: "upstream_unmet: build (success)"}, stateSuccess},
		{&store.Job{JobName: "publish", Status: status.JobSkipped, ErrorMessage: ""}, stateSuccess},
	} {
		down := &store.Job{JobName: "notify", Status: status.JobSkipped, ErrorMessage: "upstream_unmet: publish (skipped)"}
		if got := skippedState(down, []*store.Job{tc.upstream, down}); got != tc.want {
			t.Errorf("downstream of %q: %s, want %s", tc.upstream.ErrorMessage, got, tc.want)
		}
	}
}

// Check-run text carries no terminal escapes, not even their remains.
func TestPrintableLineStripsEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[31mFAIL\x1b[0m pkg/x":                         "FAIL pkg/x",
		"\x1b[1;32m✓\x1b[m ok\tdone":                        "✓ ok\tdone",
		"\x1b]0;title\x07after":                             "after",
		"\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\": "link",
		"progress\r\x1b[2K\x1b[1Gnext":                      "progressnext",
		"\u009b33mC1\u009b0m":                               "C1",
	} {
		if got := printableLine(in); got != want {
			t.Errorf("printableLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// Commit-status descriptions are cut at a word boundary, with an ellipsis,
// within 140 bytes.
func TestDescriptionCutAtAWord(t *testing.T) {
	long := `failed: step "integration tests against the staging database" exited with 1: ` + strings.Repeat("sehr-lange-wörter ", 10)
	got := truncateWords(long, maxDescription)
	if len(got) > maxDescription || !strings.HasSuffix(got, "…") {
		t.Fatalf("%q: %d bytes", got, len(got))
	}
	body := strings.TrimSuffix(got, "…")
	if !strings.HasPrefix(long, body) || (long[len(body)] != ' ') {
		t.Errorf("cut mid-word: %q", got)
	}
	if !utf8.ValidString(got) {
		t.Errorf("cut mid-rune: %q", got)
	}
	if s := "short enough"; truncateWords(s, maxDescription) != s {
		t.Errorf("a short description changed")
	}
	one := strings.Repeat("é", 200)
	if got := truncateWords(one, maxDescription); len(got) > maxDescription || !utf8.ValidString(got) {
		t.Errorf("one long word: %q", got)
	}
}
