package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// BenchmarkRunPage200Jobs measures the server side of the run page of a
// 200-job run (a fan-out of 10 × 19 legs between a setup and a final
// job): session and token check, store reads, graph layout and template
// rendering, over a real HTTP connection. The target is under 200 ms
// (make bench prints ms/page).
func BenchmarkRunPage200Jobs(b *testing.B) {
	h := newBenchHarness(b)
	runID := "55555555-5555-5555-5555-555555555555"
	now := time.Now().UTC()
	run := &store.Run{ID: runID, WorkflowName: "big", Status: status.RunRunning, Provider: provider.Generic, RepoIdentifier: "demo/app",
		Ref: "refs/heads/main", SHA: strings.Repeat("b", 40), OrgID: "demo", SourceID: "src-1", CreatedAt: now, StartedAt: &now}
	cfg := json.RawMessage(`{"steps":[{"name":"a"},{"name":"b"}]}`)
	var jobs []*store.Job
	add := func(name string, needs ...string) {
		j := &store.Job{ID: fmt.Sprintf("66666666-0000-0000-0000-%012d", len(jobs)), RunID: runID, JobName: name, BaseJobName: name,
			Status: []status.Job{status.JobSuccess, status.JobRunning, status.JobPending, status.JobFailed}[len(jobs)%4], Config: cfg, CreatedAt: now.Add(time.Duration(len(jobs)) * time.Millisecond)}
		d := int64(1234 * len(jobs))
		j.DurationMs = &d
		for _, n := range needs {
			j.Needs = append(j.Needs, store.Need{Upstream: n, RunOn: []status.Job{status.JobSuccess}})
		}
		jobs = append(jobs, j)
	}
	add("setup")
	var last []string
	for g := 0; g < 10; g++ {
		for l := 0; l < 19; l++ {
			name := fmt.Sprintf("test-%d (%d)", g, l)
			if g == 0 {
				add(name, "setup")
			} else {
				add(name, fmt.Sprintf("test-%d (%d)", g-1, l))
			}
			if g == 9 {
				last = append(last, name)
			}
		}
	}
	for len(jobs) < 199 {
		add(fmt.Sprintf("lint-%d", len(jobs)), "setup")
	}
	add("publish", last...)
	if err := h.st.CreateRun(context.Background(), run, jobs); err != nil {
		b.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	benchPage(b, c, h.srv.URL+"/ui/runs/"+runID, `class="node `, 200)
}

// benchPage gets url b.N times through c, checks that each answer is 200
// with want occurrences of mark, and reports the time per page.
func benchPage(b *testing.B, c *client, url, mark string, want int) {
	b.Helper()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		resp, err := c.hc.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := strings.Count(string(body), mark); resp.StatusCode != http.StatusOK || n != want {
			b.Fatalf("%s: %d, %d × %q, want %d", url, resp.StatusCode, n, mark, want)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
}

// BenchmarkJobPageLastPageOfMillionLineLog measures the job page showing
// the last 1,000 lines of a 1,000,000-line step log: one page is read and
// rendered, never the whole log.
func BenchmarkJobPageLastPageOfMillionLineLog(b *testing.B) {
	h := newBenchHarness(b)
	job := h.jobIDs[1]
	batch := make([]protocol.LogLine, 0, 10000)
	for i := 0; i < 1_000_000; i++ {
		batch = append(batch, protocol.LogLine{Timestamp: int64(i), Stream: protocol.StreamStdout, Text: fmt.Sprintf("line %d of a long build log \x1b[32mok\x1b[0m", i+1)})
		if len(batch) == cap(batch) {
			if err := h.logs.Append(h.runID, job, 0, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	url := h.srv.URL + fmt.Sprintf("/ui/runs/%s/jobs/%s?step=0&from=999000", h.runID, job)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		resp, err := c.hc.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Count(string(body), `<tr id="L`) != logPageSize || !strings.Contains(string(body), `id="L1000000"`) {
			b.Fatalf("job page: %d", resp.StatusCode)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
}

// BenchmarkRunsPage25Deliveries measures the runs list of 25 runs that
// each come from their own push (a GitHub-sized payload of about 25 KB
// with 20 commits): each row's commit title and actor are read from its
// delivery.
func BenchmarkRunsPage25Deliveries(b *testing.B) {
	h := newBenchHarness(b)
	ctx := context.Background()
	now := time.Now().UTC()
	commits := make([]map[string]any, 20)
	for i := range commits {
		commits[i] = map[string]any{"id": strings.Repeat("c", 40), "message": strings.Repeat("a commit message line ", 40),
			"added": []string{"internal/web/a.go", "internal/web/b.go"}, "modified": []string{"docs/web-ui.md"}}
	}
	for i := 0; i < 25; i++ {
		payload, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "commits": commits, "sender": map[string]any{"login": fmt.Sprintf("dev%d", i)},
			"head_commit": map[string]any{"message": fmt.Sprintf("change %d\n\nbody", i), "url": "https://github.com/demo/app/commit/x"}})
		del := &store.Delivery{ID: fmt.Sprintf("bench-d%d", i), SourceID: "src-1", OrgID: "demo", Event: "push", Payload: payload,
			Status: store.DeliveryReceived, ReceivedAt: now}
		if err := h.st.InsertDelivery(ctx, del); err != nil {
			b.Fatal(err)
		}
		if err := h.st.CreateRun(ctx, &store.Run{ID: fmt.Sprintf("77777777-0000-0000-0000-%012d", i), WorkflowName: "ci", Status: status.RunSuccess,
			Provider: provider.GitHub, RepoIdentifier: "demo/app", Ref: "refs/heads/main", SHA: strings.Repeat("e", 40), DeliveryID: del.ID,
			SourceID: "src-1", OrgID: "demo", TriggerType: apitypes.TriggerPush, CreatedAt: now.Add(time.Duration(i+1) * time.Second)}, nil); err != nil {
			b.Fatal(err)
		}
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	benchPage(b, c, h.srv.URL+"/ui/runs", `<td class="actor">dev`, 25)
}
