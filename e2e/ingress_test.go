package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/wait"
)

const (
	ingressRepo   = "acme/api"
	ingressSecret = "e2e-webhook-secret-0123456789"
	ingressApp    = 4242
)

// ingressLock is a lock with one push workflow whose job asks for a label
// no agent has, so runs are created but no agent is spawned.
var ingressLock = `{"schemaVersion":29,"source":{"file":".kici/workflows/ci.yaml","export":"#default"},"contentHash":"x","workflows":[` +
	`{"name":"ci","source":{"file":".kici/workflows/ci.yaml","export":"#default"},"contentHash":"x","compileSchemaVersion":5,` +
	`"triggers":[{"_type":"push","branches":[{"type":"glob","pattern":"main"}]}],"jobs":[{"_type":"static","name":"build",` +
	`"runsOn":[{"kind":"exact","value":"e2e-no-such-agent"}],"needs":[],"steps":[{"name":"s","run":"true"}]}]}]}`

// startIn starts kici-orchestrator on an existing data dir (a restart).
func startIn(t *testing.T, dataDir string, extraEnv ...string) *orchestrator {
	t.Helper()
	_ = os.Remove(filepath.Join(dataDir, "orchestrator.json")) // stale after a kill -9
	o := &orchestrator{dataDir: dataDir, logPath: filepath.Join(dataDir, fmt.Sprintf("orchestrator-%d.log", time.Now().UnixNano()))}
	logFile, err := os.Create(o.logPath)
	if err != nil {
		t.Fatal(err)
	}
	o.env = append([]string{"KICI_DATA_DIR=" + dataDir}, extraEnv...)
	o.cmd = exec.Command(filepath.Join(binDir, "kici-orchestrator"))
	o.cmd.Env = append(cleanEnv(), append(o.env, "KICI_PORT=0")...)
	o.cmd.Stdout, o.cmd.Stderr = logFile, logFile
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		o.stop(t)
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(o.logPath)
			t.Logf("orchestrator log (%s):\n%s", filepath.Base(o.logPath), b)
		}
	})
	wait.Until(30*time.Second, func() bool {
		if b, err := os.ReadFile(filepath.Join(dataDir, "orchestrator.json")); err == nil {
			var ep struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(b, &ep) == nil {
				o.url = ep.URL
			}
		}
		return o.url != ""
	})
	if o.url == "" {
		b, _ := os.ReadFile(o.logPath)
		t.Fatalf("orchestrator did not start in 30s; log:\n%s", b)
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	o.token = strings.TrimSpace(string(tok))
	return o
}

func ghPush(after string) []byte {
	b, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000", "after": after,
		"installation": map[string]any{"id": 7}, "sender": map[string]any{"login": "dev"},
		"repository": map[string]any{"full_name": ingressRepo, "default_branch": "main", "clone_url": "https://github.com/acme/api.git"}})
	return b
}

// postGitHub sends one signed delivery and returns the status code.
func postGitHub(t *testing.T, url, delivery string, body []byte) int {
	mac := hmac.New(sha256.New, []byte(ingressSecret))
	mac.Write(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestIngressKill9RecoveryAndReplays: GitHub deliveries answered 202 by the
// real orchestrator survive a kill -9 that lands before they are processed;
// after a restart each is processed exactly once (one run each). Then 100
// concurrent replays of one delivery make exactly one run, a bad
// signature leaves only a rejected record, and the event log and its CLI
// show what happened.
func TestIngressKill9RecoveryAndReplays(t *testing.T) {
	fake := ghfake.New(ingressApp)
	defer fake.Close()
	const n = 12
	shas := make([]string, n)
	for i := range shas {
		shas[i] = fmt.Sprintf("%040x", i+1)
		fake.SetFile(ingressRepo, shas[i], ".kici/kici.lock.json", []byte(ingressLock))
	}
	// Each lock fetch takes 300 ms, so the single pipeline worker is still
	// busy when the orchestrator is killed.
	fake.SetContentsDelay(300 * time.Millisecond)

	o := startOrchestrator(t, loopbackSourcesEnv)
	srcID := o.addGitHubAppSource(t, fake)
	hookURL := o.url + "/webhook/acme/github/" + srcID

	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = postGitHub(t, hookURL, fmt.Sprintf("kill-%d", i), ghPush(shas[i]))
		}()
	}
	wg.Wait()
	if err := o.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = o.cmd.Wait()
	for i, c := range codes {
		if c != 202 {
			t.Fatalf("delivery %d answered %d, want 202", i, c)
		}
	}

	// What the crash left behind: every accepted delivery, most unprocessed.
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(o.dataDir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	pending, err := st.ListUnprocessedDeliveries(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := st.GetDelivery(ctx, fmt.Sprintf("github:%d:kill-%d", ingressApp, i)); err != nil {
			t.Fatalf("delivery kill-%d answered 202 but is not in the store after kill -9: %v", i, err)
		}
	}
	st.Close()
	t.Logf("after kill -9: %d of %d accepted deliveries still unprocessed", len(pending), n)
	if len(pending) == 0 {
		t.Fatal("every delivery was processed before the kill: the recovery path was not exercised")
	}

	o2 := startIn(t, o.dataDir, loopbackSourcesEnv)
	var page struct {
		Total int `json:"total"`
	}
	if !wait.Until(60*time.Second, func() bool {
		o2.get(t, "/api/v1/admin/event-log?status=received&limit=1", &page)
		return page.Total == 0
	}) {
		t.Fatalf("%d deliveries still unprocessed 60 s after the restart", page.Total)
	}
	for i := 0; i < n; i++ {
		var list struct {
			Runs []runView `json:"runs"`
		}
		o2.get(t, fmt.Sprintf("/api/v1/admin/runs?deliveryId=github:%d:kill-%d", ingressApp, i), &list)
		if len(list.Runs) != 1 || list.Runs[0].SHA != shas[i] {
			t.Fatalf("delivery kill-%d: %d runs after recovery, want exactly 1 at %s", i, len(list.Runs), shas[i])
		}
	}

	// 100 concurrent replays of one delivery ⇒ one 202, 99 duplicates, one run.
	fake.SetContentsDelay(0)
	body := ghPush(shas[0])
	var mu sync.Mutex
	got := map[int]int{}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := postGitHub(t, o2.url+"/webhook/acme/github/"+srcID, "replayed", body)
			mu.Lock()
			got[c]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if got[202] != 1 || got[200] != 99 {
		t.Fatalf("100 replays answered %v, want one 202 and 99 × 200", got)
	}
	id := fmt.Sprintf("github:%d:replayed", ingressApp)
	waitProcessed(t, o2, id)
	var list struct {
		Runs []runView `json:"runs"`
	}
	o2.get(t, "/api/v1/admin/runs?deliveryId="+id, &list)
	if len(list.Runs) != 1 {
		t.Fatalf("100 replays created %d runs, want 1", len(list.Runs))
	}

	// A bad signature: 401, and nothing but a rejected record.
	req, _ := http.NewRequest("POST", o2.url+"/webhook/acme/github/"+srcID, bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "forged")
	req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("ab", 32))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("forged delivery: %d, want 401", resp.StatusCode)
	}
	var logPage struct {
		Total int `json:"total"`
	}
	o2.get(t, "/api/v1/admin/event-log?deliveryId=forged", &logPage)
	if logPage.Total != 0 {
		t.Fatal("a forged delivery reached the event log")
	}
	rej := o2.admin(t, "event-log", "rejected", "--source", srcID)
	if !strings.Contains(rej, "invalid signature") || !strings.Contains(rej, "forged") {
		t.Fatalf("rejected list:\n%s", rej)
	}

	// The CLI shows the decision trace of a recovered delivery.
	show := o2.admin(t, "event-log", "show", fmt.Sprintf("github:%d:kill-0", ingressApp))
	for _, want := range []string{"Status:    processed", "RUN  ci: Matched trigger 1 (push)", "[pass] branch", shas[0]} {
		if !strings.Contains(show, want) {
			t.Fatalf("event-log show lacks %q:\n%s", want, show)
		}
	}
	dups := o2.admin(t, "event-log", "list", "--status", string(store.EventLogDuplicate), "--limit", "200", "-q")
	if c := strings.Count(dups, "github:4242:replayed"); c != 99 {
		t.Fatalf("event log lists %d duplicates of the replayed delivery, want 99", c)
	}
}

func waitProcessed(t *testing.T, o *orchestrator, id string) {
	t.Helper()
	wait.For(t, 30*time.Second, "delivery "+id+" to be processed", func() bool {
		var rec struct {
			Delivery struct {
				Status string `json:"status"`
			} `json:"delivery"`
		}
		o.get(t, "/api/v1/admin/event-log/"+id, &rec)
		return rec.Delivery.Status != "received"
	})
}

const eventsWorkflow = `name: on-deploy
on:
  kici_event:
    name: deploy
    match: {"$.env": "prod"}
jobs:
  deploy:
    steps:
      - run: echo "deploying"
`

const afterWorkflow = `name: after-deploy
on:
  workflow_complete:
    name: on-deploy
    status: [success]
jobs:
  notify:
    steps:
      - run: echo "deploy finished"
`

const pushWorkflow = `name: ci
on:
  push:
    branches: [main]
jobs:
  build:
    steps:
      - run: echo build
`

// TestEmittedEventsAndCompletionChain: a push to the default branch
// registers the workflows; an emitted kici_event whose payload matches
// starts its workflow (run by a spawned agent), whose completion emits
// workflow_complete, which starts the chained workflow; a payload that does
// not match starts nothing and the event log says why.
func TestEmittedEventsAndCompletionChain(t *testing.T) {
	dir := repoWithWorkflows(t, map[string]string{"ci.yaml": pushWorkflow, "deploy.yaml": eventsWorkflow, "after.yaml": afterWorkflow})

	o := startOrchestrator(t)
	src := o.admin(t, "-q", "source", "add", "local", "--org", "acme", "--path", dir, "--name", "app")
	push := o.admin(t, "-q", "source", "trigger-local", src)
	if r := o.waitRun(t, push, 90*time.Second); r.Status != "success" {
		t.Fatalf("push run: %+v", r)
	}
	regs := o.admin(t, "registration", "list", "--trigger-type", "kici_event")
	if !strings.Contains(regs, "on-deploy") || strings.Contains(regs, "after-deploy") {
		t.Fatalf("kici_event registrations:\n%s", regs)
	}

	miss := o.admin(t, "-q", "event", "emit", "deploy", "--payload", `{"env":"dev"}`)
	hit := o.admin(t, "-q", "event", "emit", "deploy", "--payload", `{"env":"prod"}`, "--source-repo", "acme/app")
	deploy := o.waitRun(t, hit, 90*time.Second)
	if deploy.Status != "success" || deploy.WorkflowName != "on-deploy" {
		t.Fatalf("deploy run: %+v", deploy)
	}
	after := o.waitRun(t, "workflow_complete:"+deploy.RunID, 90*time.Second)
	if after.Status != "success" || after.WorkflowName != "after-deploy" {
		t.Fatalf("chained run: %+v", after)
	}
	waitProcessed(t, o, miss)
	var list struct {
		Runs []runView `json:"runs"`
	}
	o.get(t, "/api/v1/admin/runs?deliveryId="+miss, &list)
	if len(list.Runs) != 0 {
		t.Fatalf("a non-matching payload started %d runs", len(list.Runs))
	}
	show := o.admin(t, "event-log", "show", miss)
	if !strings.Contains(show, "SKIP on-deploy") || !strings.Contains(show, "[FAIL] jsonpath match") {
		t.Fatalf("event-log show of the non-matching event:\n%s", show)
	}
}

// The orchestrator keeps the sources it checks webhooks against in memory,
// and a change to one still applies to the very next webhook, with no wait:
// made in another process (a statement on the database file, as in the
// sqlite3 shell) or through the admin API. The deliveries in between are
// answered from memory, which the source revision's triggers keep honest.
func TestSourceChangesApplyToTheNextWebhook(t *testing.T) {
	fake := ghfake.New(ingressApp)
	defer fake.Close()
	sha := fmt.Sprintf("%040x", 1)
	fake.SetFile(ingressRepo, sha, ".kici/kici.lock.json", []byte(ingressLock))
	o := startOrchestrator(t, loopbackSourcesEnv)
	srcID := o.addGitHubAppSource(t, fake)
	hookURL := o.url + "/webhook/acme/github/" + srcID
	n := 0
	expect := func(want int, when string) {
		t.Helper()
		n++
		if got := postGitHub(t, hookURL, fmt.Sprintf("next-%d", n), ghPush(sha)); got != want {
			t.Fatalf("delivery %d %s: %d, want %d", n, when, got, want)
		}
	}
	expect(202, "first")
	expect(202, "second, from memory")

	// The orchestrator writes the file meanwhile: wait for its lock as the
	// sqlite3 shell would (.timeout).
	other, err := sql.Open("sqlite", "file:"+filepath.Join(o.dataDir, "kici.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	statement := func(q string) {
		t.Helper()
		if _, err := other.Exec(q, srcID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	statement(`UPDATE sources SET enabled = 0 WHERE id = ?`)
	expect(404, "after another process disabled the source")
	statement(`UPDATE sources SET enabled = 1 WHERE id = ?`)
	expect(202, "after another process enabled it again")
	expect(202, "again, from memory")
	statement(`UPDATE source_secrets SET revoked_at = 1 WHERE source_id = ?`)
	expect(422, "after another process revoked its only secret")
	statement(`UPDATE source_secrets SET revoked_at = NULL WHERE source_id = ?`)
	expect(202, "after the secret was made active again")

	rotated := o.admin(t, "-q", "source", "secrets", "rotate", srcID)
	if rotated == "" || strings.Contains(rotated, ingressSecret) {
		t.Fatalf("secrets rotate printed %q", rotated)
	}
	var oldID string
	if err := other.QueryRow(`SELECT id FROM source_secrets WHERE source_id = ? ORDER BY created_at, id LIMIT 1`, srcID).Scan(&oldID); err != nil {
		t.Fatal(err)
	}
	o.admin(t, "source", "secrets", "revoke", srcID, oldID)
	expect(401, "after the admin API revoked the secret it was signed with")
}
