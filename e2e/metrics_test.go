package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// scrape returns the orchestrator's /metrics exposition.
func scrape(t *testing.T, o *orchestrator) string {
	t.Helper()
	resp, err := http.Get(o.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// sample returns the value of the first series matching the exposition line
// prefix (name and labels), or -1.
func sample(text, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// After one push runs to its end, /metrics tells the story an operator
// alerts on: the webhook's accept latency, the delivery and run outcomes,
// the jobs by status, dispatch latency, log lines stored (none dropped),
// HTTP requests by route, and the Go runtime and process figures; with
// KICI_LOG_FORMAT=json every log line of the orchestrator and of the agents
// it spawned is a JSON object.
func TestMetricsAfterAPushAndJSONLogs(t *testing.T) {
	repo, _ := makeRepo(t)
	o := startOrchestrator(t, "KICI_LOG_FORMAT=json")
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "metrics", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	run := o.waitRun(t, delivery, 4*time.Minute)

	// The run ends before its last spawned agent has left: wait for both.
	var text string
	wait.Until(10*time.Second, func() bool {
		text = scrape(t, o)
		return sample(text, `kici_orch_executions_total{status="`+run.Status+`"}`) == 1 &&
			sample(text, `kici_orch_agents_active`) == 0
	})
	for series, want := range map[string]float64{
		`kici_orch_runs_created_total`:                            1,
		`kici_orch_executions_total{status="` + run.Status + `"}`: 1,
		`kici_orch_log_lines_total{result="dropped"}`:             0,
		`kici_orch_log_bytes_total{result="dropped"}`:             0,
		`kici_orch_agents_active`:                                 0,
		`kici_orch_dispatch_queue_depth`:                          0,
	} {
		if got := sample(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, series := range []string{
		`kici_orch_webhook_accept_duration_seconds_count{code="202"}`,
		// The push and the internal job_complete/workflow_complete events.
		`kici_orch_webhooks_processed_total{status="processed"}`,
		`kici_orch_jobs_finished_total{status="success"}`,
		`kici_orch_jobs_finished_total{status="failed"}`,
		`kici_orch_dispatch_latency_seconds_count`,
		`kici_orch_log_lines_total{result="stored"}`,
		`kici_orch_http_requests_total{code="202",route="POST /webhook/{orgId}/generic/{name}"}`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	} {
		if got := sample(text, series); got <= 0 {
			t.Errorf("%s = %v, want > 0", series, got)
		}
	}
	if strings.Contains(text, `route="/api/v1/admin/runs/`) {
		t.Error("a route label carries a raw path (one series per id)")
	}

	o.stop(t)
	f, err := os.Open(o.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil {
			t.Fatalf("log line is not a JSON record: %q", sc.Text())
		}
		n++
	}
	if n == 0 {
		t.Fatal("orchestrator logged nothing")
	}
	// The agents it spawned log in the same format.
	agentLogs, _ := filepath.Glob(filepath.Join(o.dataDir, "agents", "*.log"))
	if len(agentLogs) == 0 {
		t.Fatal("no spawned agent log")
	}
	for _, path := range agentLogs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil {
				t.Fatalf("spawned agent log %s: line is not a JSON record: %q", filepath.Base(path), line)
			}
		}
	}
}
