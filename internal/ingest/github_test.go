package ingest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/testutil/fixtures"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
	"kici.dev/kici/internal/webhook"
)

const (
	ghRepo   = "acme/api"
	shaMain  = "1111111111111111111111111111111111111111"
	shaPrev  = "0123456789012345678901234567890123456789"
	shaHead  = "2222222222222222222222222222222222222222"
	ghSecret = "gh-secret"
)

// wfJSON is a lock workflow with one job on a label no agent has.
func wfJSON(name, triggers string) string {
	return `{"name":"` + name + `","source":{"file":".kici/workflows/x.yaml","export":"#default"},"contentHash":"x",` +
		`"compileSchemaVersion":5,"triggers":` + triggers + `,"jobs":[{"_type":"static","name":"build",` +
		`"runsOn":[{"kind":"exact","value":"nowhere"}],"needs":[],"steps":[{"name":"s","run":"true"}]}]}`
}

func lockJSON(wfs ...string) []byte {
	return []byte(`{"schemaVersion":29,"source":{"file":".kici/workflows/x.yaml","export":"#default"},"contentHash":"x","workflows":[` +
		strings.Join(wfs, ",") + `]}`)
}

type ghHarness struct {
	t    *testing.T
	ctx  context.Context
	st   store.Store
	tr   *runs.Tracker
	proc *Processor
	fake *ghfake.Server
	src  *store.Source
	srv  *httptest.Server
}

func newGHHarness(t *testing.T) *ghHarness {
	t.Helper()
	return newGHHarnessWith(t, func(*ghHarness) (runs.TrackerDeps, ProcessorDeps) {
		return runs.TrackerDeps{}, ProcessorDeps{}
	})
}

// newGHHarnessWith is newGHHarness whose tracker and processor take the
// collaborators deps returns for the harness (its store is open; its
// tracker and processor are built after).
func newGHHarnessWith(t *testing.T, deps func(h *ghHarness) (runs.TrackerDeps, ProcessorDeps)) *ghHarness {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	h := &ghHarness{t: t, ctx: ctx, st: st, fake: ghfake.New(77)}
	trDeps, procDeps := deps(h)
	h.tr = runs.NewTracker(st, &countingEnqueuer{st: st}, nil, trDeps)
	h.proc = NewProcessor(st, h.tr, nil, procDeps)
	t.Cleanup(h.fake.Close)
	h.src = &store.Source{ID: "src-gh", OrgID: "acme", Name: "gh", Provider: provider.GitHub, RoutingKey: "github:77", VerificationMethod: "hmac_sha256", Enabled: true}
	if err := st.CreateSourceWithSettings(ctx, h.src, &store.SourceSettings{RateLimitRPM: -1,
		GitHub: &store.GitHubConfig{APIBaseURL: h.fake.URL, AppID: 77, PrivateKeyPEM: h.fake.PrivateKeyPEM}},
		[]*store.SourceSecret{{Secret: ghSecret}}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in := webhook.NewIngress(st, h.proc, webhook.Options{})
	mux.Handle("POST /webhook/{orgId}/github/{sourceId}", in.GitHub())
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

func pushPayload(ref, before, after string) []byte {
	b, _ := json.Marshal(map[string]any{"ref": ref, "before": before, "after": after, "installation": map[string]any{"id": 9},
		"repository": map[string]any{"full_name": ghRepo, "default_branch": "main", "clone_url": "https://github.com/acme/api.git"},
		"sender":     map[string]any{"login": "dev"}, "head_commit": map[string]any{"id": after}})
	return b
}

func prPayload(author string) []byte {
	b, _ := json.Marshal(map[string]any{"action": "opened", "number": 5, "installation": map[string]any{"id": 9},
		"pull_request": map[string]any{"number": 5, "user": map[string]any{"login": author},
			"head": map[string]any{"ref": "feature", "sha": shaHead, "repo": map[string]any{"full_name": ghRepo}},
			"base": map[string]any{"ref": "main", "sha": shaMain, "repo": map[string]any{"full_name": ghRepo}}},
		"repository": map[string]any{"full_name": ghRepo, "default_branch": "main", "clone_url": "https://github.com/acme/api.git"},
		"sender":     map[string]any{"login": author}})
	return b
}

// post sends a signed delivery to the GitHub route and returns the
// delivery id (202 expected).
func (h *ghHarness) post(event, delivery string, body []byte) string {
	h.t.Helper()
	mac := hmac.New(sha256.New, []byte(ghSecret))
	mac.Write(body)
	req, _ := http.NewRequest("POST", h.srv.URL+"/webhook/acme/github/"+h.src.ID, bytes.NewReader(body))
	req.Header.Set(webhook.HeaderGitHubEvent, event)
	req.Header.Set(webhook.HeaderGitHubDelivery, delivery)
	req.Header.Set(webhook.HeaderHubSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r webhook.Response
	_ = json.NewDecoder(resp.Body).Decode(&r)
	if resp.StatusCode != 202 {
		h.t.Fatalf("POST %s: %d %+v", event, resp.StatusCode, r)
	}
	return r.DeliveryID
}

func (h *ghHarness) process(id string) (*store.Delivery, *Trace, *store.EventLogEntry) {
	h.t.Helper()
	if err := h.proc.Process(h.ctx, id); err != nil {
		h.t.Fatalf("Process: %v", err)
	}
	d, err := h.st.GetDelivery(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	var tr Trace
	if err := json.Unmarshal(d.Decisions, &tr); err != nil {
		h.t.Fatalf("trace %s: %v", d.Decisions, err)
	}
	e, err := h.st.GetEventLog(h.ctx, "acme", id)
	if err != nil {
		h.t.Fatal(err)
	}
	return d, &tr, e
}

func (h *ghHarness) runs(id string) map[string]*store.Run {
	h.t.Helper()
	return runsByWorkflow(h.t, h.st, id)
}

// A push to the default branch reads the lock at `after` through the App's
// installation token, fetches changed files with compare for the path
// filter, creates the matched runs, refreshes the registrations, and a
// second push at the same SHA reuses the cached lock.
func TestGitHubPushFetchesLockAndRegisters(t *testing.T) {
	h := newGHHarness(t)
	lock := lockJSON(
		wfJSON("ci", `[{"_type":"push","branches":[{"type":"glob","pattern":"main"}]}]`),
		wfJSON("docs", `[{"_type":"push","paths":["docs/**"]}]`),
		wfJSON("src", `[{"_type":"push","paths":["src/**"]}]`),
		wfJSON("on-deploy", `[{"_type":"kici_event","eventName":"deploy"}]`),
	)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lock)
	h.fake.SetCompare(ghRepo, shaPrev, shaMain, []string{"src/app.go", "README.md"})

	id := h.post("push", "d-1", pushPayload("refs/heads/main", shaPrev, shaMain))
	d, tr, e := h.process(id)
	if d.Status != store.DeliveryProcessed {
		t.Fatalf("delivery %s: %s (%s)", id, d.Status, d.Error)
	}
	runs := h.runs(id)
	if len(runs) != 2 || runs["ci"] == nil || runs["src"] == nil {
		t.Fatalf("runs = %v, want ci and src (docs path filter does not match; kici_event is not a push)", runs)
	}
	r := runs["ci"]
	if r.Provider != provider.GitHub || r.RepoIdentifier != ghRepo || r.SHA != shaMain || r.Ref != "refs/heads/main" ||
		r.RepoURL != "https://github.com/acme/api.git" || r.SourceID != h.src.ID || r.TriggeredBy != "dev" {
		t.Fatalf("run = %+v", r)
	}
	if fmt.Sprint(tr.ChangedFiles) != "[src/app.go README.md]" || len(tr.Workflows) != 4 {
		t.Fatalf("trace = %+v", tr)
	}
	if e.Status != store.EventLogProcessed || e.MatchedCount != 2 || len(e.RunIDs) != 2 || e.RepoIdentifier != ghRepo {
		t.Fatalf("event log = %+v", e)
	}
	regs, err := h.st.ListRegistrations(h.ctx, store.RegistrationFilter{RepoIdentifier: ghRepo})
	if err != nil || len(regs) != 4 || regs[0].SHA != shaMain {
		t.Fatalf("registrations = %d (%v), want the 4 workflows at %s", len(regs), err, shaMain)
	}
	if h.fake.Calls("POST /app/installations/9/access_tokens") != 1 {
		t.Fatalf("installation tokens minted = %d, want 1", h.fake.Calls("POST /app/installations/9/access_tokens"))
	}

	// Same SHA again (a different delivery): the lock comes from the cache.
	id2 := h.post("push", "d-2", pushPayload("refs/heads/main", shaPrev, shaMain))
	if d, _, _ := h.process(id2); d.Status != store.DeliveryProcessed {
		t.Fatalf("second delivery: %s %s", d.Status, d.Error)
	}
	if n := h.fake.CallsWithPrefix("GET /repos/acme/api/contents/"); n != 1 {
		t.Fatalf("contents fetched %d times for one (repo, sha), want 1 (cache)", n)
	}
	if h.fake.Calls("POST /app/installations/9/access_tokens") != 1 {
		t.Fatal("the installation token was not reused")
	}
}

// A pull request from a contributor without write access runs the base
// branch's lock, never the lock in the contributor's head commit; a
// collaborator with write access gets the head lock.
func TestGitHubPullRequestLockByPermission(t *testing.T) {
	h := newGHHarness(t)
	pr := `[{"_type":"pr","events":["opened"]}]`
	h.fake.SetFile(ghRepo, shaHead, lockfetch.LockPath, lockJSON(wfJSON("from-head", pr)))
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfJSON("from-base", pr)))
	h.fake.SetBranch(ghRepo, "main", shaMain)
	h.fake.SetPermission(ghRepo, "maintainer", "write")
	h.fake.SetPermission(ghRepo, "reader", "read")

	for _, c := range []struct{ author, want string }{{"outsider", "from-base"}, {"reader", "from-base"}, {"maintainer", "from-head"}} {
		id := h.post("pull_request", "pr-"+c.author, prPayload(c.author))
		d, tr, _ := h.process(id)
		runs := h.runs(id)
		if d.Status != store.DeliveryProcessed || len(runs) != 1 || runs[c.want] == nil {
			t.Fatalf("PR by %s: status %s (%s), runs %v; want one run of %s", c.author, d.Status, d.Error, runs, c.want)
		}
		if c.want == "from-base" && !strings.Contains(tr.Summary, "base branch main") {
			t.Fatalf("PR by %s: summary %q does not explain the base-branch lock", c.author, tr.Summary)
		}
		if r := runs[c.want]; r.SHA != shaHead || r.Ref != "refs/heads/feature" {
			t.Fatalf("PR run = %+v (the run still builds the PR head)", r)
		}
	}
}

// Missing, corrupt and over-cap locks are recorded (lockfile_missing,
// failed with the reason) and the pipeline keeps working.
func TestGitHubBadLocksAreRecorded(t *testing.T) {
	h := newGHHarness(t)
	h.proc.Forges = NewForges(1000)
	shaCorrupt := strings.Repeat("c", 40)
	shaBig := strings.Repeat("b", 40)
	h.fake.SetFile(ghRepo, shaCorrupt, lockfetch.LockPath, []byte(`{"schemaVersion": 29, "workflows": [`))
	h.fake.SetFile(ghRepo, shaBig, lockfetch.LockPath, bytes.Repeat([]byte(" "), 1001))
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfJSON("ci", `[{"_type":"push"}]`)))

	id := h.post("push", "m", pushPayload("refs/heads/x", shaPrev, strings.Repeat("d", 40)))
	d, tr, e := h.process(id)
	if d.Status != store.DeliveryProcessed || e.Status != store.EventLogLockfileMissing || tr.LockStatus != LockMissing || len(h.runs(id)) != 0 {
		t.Fatalf("missing lock: delivery %s, event log %s, trace %+v", d.Status, e.Status, tr)
	}
	id = h.post("push", "c", pushPayload("refs/heads/x", shaPrev, shaCorrupt))
	d, _, e = h.process(id)
	if d.Status != store.DeliveryFailed || e.Status != store.EventLogFailed || !strings.Contains(d.Error, "lockfile_corrupt") {
		t.Fatalf("corrupt lock: delivery %s %q, event log %s", d.Status, d.Error, e.Status)
	}
	id = h.post("push", "b", pushPayload("refs/heads/x", shaPrev, shaBig))
	d, _, _ = h.process(id)
	if d.Status != store.DeliveryFailed || !strings.Contains(d.Error, "lockfile_too_large") || !strings.Contains(d.Error, "1000-byte cap") {
		t.Fatalf("over-cap lock: delivery %s %q", d.Status, d.Error)
	}
	id = h.post("push", "ok", pushPayload("refs/heads/x", shaPrev, shaMain))
	if d, _, _ := h.process(id); d.Status != store.DeliveryProcessed || len(h.runs(id)) != 1 {
		t.Fatalf("a good lock after bad ones: %s %q", d.Status, d.Error)
	}
}

// 100 concurrent replays of one delivery, processed by the running
// pipeline, create exactly one set of runs.
func TestGitHubConcurrentReplaysOneSetOfRuns(t *testing.T) {
	h := newGHHarness(t)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(
		wfJSON("a", `[{"_type":"push"}]`), wfJSON("b", `[{"_type":"push"}]`)))
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	h.proc.Start(ctx)
	defer h.proc.Stop()
	body := pushPayload("refs/heads/main", shaPrev, shaMain)
	mac := hmac.New(sha256.New, []byte(ghSecret))
	mac.Write(body)
	sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", h.srv.URL+"/webhook/acme/github/"+h.src.ID, bytes.NewReader(body))
			req.Header.Set(webhook.HeaderGitHubEvent, "push")
			req.Header.Set(webhook.HeaderGitHubDelivery, "replayed")
			req.Header.Set(webhook.HeaderHubSignature, sig)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	id := "github:77:replayed"
	wait.For(t, 10*time.Second, "the delivery to be processed", func() bool {
		d, err := h.st.GetDelivery(h.ctx, id)
		return err == nil && d.Status != store.DeliveryReceived
	})
	all, n, err := h.st.ListRuns(h.ctx, store.RunFilter{Limit: 100})
	if err != nil || n != 2 || len(all) != 2 {
		t.Fatalf("runs after 100 replays = %d (%v), want 2 (one per matched workflow)", n, err)
	}
}

// kici_event, workflow_complete and job_complete events emitted by kici
// start the registered workflows they match, once per event id.
func TestInternalEventsMatchRegistrations(t *testing.T) {
	h := newGHHarness(t)
	// The processor, built on the tracker, hears of finished runs and jobs.
	h.tr.Subscribe(h.proc)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(
		wfJSON("ci", `[{"_type":"push"}]`),
		wfJSON("deploy", `[{"_type":"kici_event","eventName":"deploy","match":{"$.env":"prod"}}]`),
		wfJSON("after-ci", `[{"_type":"workflow_complete","name":"ci","status":["success"]}]`),
		wfJSON("after-build", `[{"_type":"job_complete","workflow":"ci","job":"build","status":["failed"]}]`),
	))
	id := h.post("push", "p", pushPayload("refs/heads/main", shaPrev, shaMain))
	if d, _, _ := h.process(id); d.Status != store.DeliveryProcessed {
		t.Fatalf("push: %s %s", d.Status, d.Error)
	}
	ci := h.runs(id)["ci"]
	if ci == nil {
		t.Fatal("no ci run")
	}

	// kici_event: only a matching payload starts deploy; a replayed id nothing.
	for i, c := range []struct {
		payload string
		want    int
	}{{`{"env":"staging"}`, 0}, {`{"env":"prod"}`, 1}} {
		eid := fmt.Sprintf("kici_event:e%d", i)
		if dup, err := h.proc.Emit(h.ctx, eid, "acme", &InternalEvent{Kind: KindKiciEvent, EventName: "deploy", Payload: json.RawMessage(c.payload)}); err != nil || dup {
			t.Fatalf("emit: dup %v err %v", dup, err)
		}
		if dup, _ := h.proc.Emit(h.ctx, eid, "acme", &InternalEvent{Kind: KindKiciEvent, EventName: "deploy", Payload: json.RawMessage(c.payload)}); !dup {
			t.Fatal("a second emit with the same id is not a duplicate")
		}
		if err := h.proc.Process(h.ctx, eid); err != nil {
			t.Fatal(err)
		}
		runs := h.runs(eid)
		if len(runs) != c.want || (c.want == 1 && (runs["deploy"] == nil || runs["deploy"].SHA != shaMain || runs["deploy"].RepoIdentifier != ghRepo)) {
			t.Fatalf("kici_event %s: runs %v, want %d deploy run at the registered commit", c.payload, runs, c.want)
		}
	}

	// The ci run's job fails ⇒ job_complete (failed) starts after-build;
	// the run fails ⇒ workflow_complete (failed) does not start after-ci.
	jobs, _ := h.st.ListJobs(h.ctx, ci.ID)
	if err := h.tr.JobFinished(h.ctx, jobs[0].ID, status.JobFailed, "boom", time.Now()); err != nil {
		t.Fatal(err)
	}
	jid, wid := string(KindJobComplete)+":"+jobs[0].ID, string(KindWorkflowComplete)+":"+ci.ID
	for _, id := range []string{jid, wid} {
		if err := h.proc.Process(h.ctx, id); err != nil {
			t.Fatalf("process %s: %v", id, err)
		}
	}
	if runs := h.runs(jid); len(runs) != 1 || runs["after-build"] == nil {
		t.Fatalf("job_complete runs = %v, want after-build", runs)
	}
	if runs := h.runs(wid); len(runs) != 0 {
		t.Fatalf("workflow_complete(failed) runs = %v, want none (after-ci wants success)", runs)
	}
	d, _ := h.st.GetDelivery(h.ctx, wid)
	var ie InternalEvent
	_ = json.Unmarshal(d.Payload, &ie)
	if ie.Status != "failed" || ie.WorkflowName != "ci" || ie.ChainDepth != 1 {
		t.Fatalf("workflow_complete event = %+v", ie)
	}
}

// A finished run and job whose org has no registration with a
// workflow_complete or job_complete trigger emit nothing (whatever other
// orgs' registrations listen to): no delivery, no event-log entry. Once a registration listens, the next completion is
// emitted.
func TestCompletionEventsOnlyWhenARegistrationListens(t *testing.T) {
	h := newGHHarness(t)
	h.tr.Subscribe(h.proc)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfJSON("ci", `[{"_type":"push"}]`)))
	id := h.post("push", "p", pushPayload("refs/heads/main", shaPrev, shaMain))
	if d, _, _ := h.process(id); d.Status != store.DeliveryProcessed {
		t.Fatalf("push: %s %s", d.Status, d.Error)
	}
	ci := h.runs(id)["ci"]
	// Another org's registrations listening change nothing for this one.
	if err := h.st.ReplaceRegistrations(h.ctx, "src-other", "other/app", []*store.Registration{{OrgID: "other", RoutingKey: "github:7",
		Provider: provider.GitHub, WorkflowName: "after", TriggerTypes: []string{"job_complete", "workflow_complete"}, Workflow: json.RawMessage(`{}`), SHA: shaMain}}); err != nil {
		t.Fatal(err)
	}
	jobs, _ := h.st.ListJobs(h.ctx, ci.ID)
	if err := h.tr.JobFinished(h.ctx, jobs[0].ID, status.JobSuccess, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, did := range []string{string(KindJobComplete) + ":" + jobs[0].ID, string(KindWorkflowComplete) + ":" + ci.ID} {
		if _, err := h.st.GetDelivery(h.ctx, did); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delivery %s with no registration listening: %v, want none", did, err)
		}
		if e, err := h.st.GetEventLog(h.ctx, "", did); err == nil {
			t.Fatalf("event-log entry %+v with no registration listening", e)
		}
	}

	h.fake.SetFile(ghRepo, shaHead, lockfetch.LockPath, lockJSON(
		wfJSON("ci", `[{"_type":"push"}]`),
		wfJSON("after-ci", `[{"_type":"workflow_complete","name":"ci"}]`)))
	id = h.post("push", "p2", pushPayload("refs/heads/main", shaMain, shaHead))
	if d, _, _ := h.process(id); d.Status != store.DeliveryProcessed {
		t.Fatalf("second push: %s %s", d.Status, d.Error)
	}
	ci = h.runs(id)["ci"]
	jobs, _ = h.st.ListJobs(h.ctx, ci.ID)
	if err := h.tr.JobFinished(h.ctx, jobs[0].ID, status.JobSuccess, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.GetDelivery(h.ctx, string(KindWorkflowComplete)+":"+ci.ID); err != nil {
		t.Fatalf("workflow_complete with a registration listening: %v", err)
	}
	if _, err := h.st.GetDelivery(h.ctx, string(KindJobComplete)+":"+jobs[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("job_complete, which nothing listens to: %v, want no delivery", err)
	}
}

// Every real GitHub payload goes through ingress and the pipeline without
// a failure or a panic: supported events read the lock (none here ⇒
// lockfile_missing), the others are recorded as ignored.
func TestGitHubEveryFixtureProcessed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtures.GitHubWebhooksDir(), "*.json"))
	if err != nil || len(files) < 300 {
		t.Fatalf("fixtures: %d (%v)", len(files), err)
	}
	h := newGHHarness(t)
	h.fake.Token = "ghp_fixture"
	set, _ := h.st.GetSourceSettings(h.ctx, h.src.ID)
	set.GitHub = &store.GitHubConfig{APIBaseURL: h.fake.URL, Token: "ghp_fixture"}
	if err := h.st.PutSourceSettings(h.ctx, set); err != nil {
		t.Fatal(err)
	}
	statuses := map[store.EventLogStatus]int{}
	for i, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		event := strings.SplitN(filepath.Base(f), ".", 2)[0]
		id := h.post(event, fmt.Sprintf("fx-%d", i), body)
		d, _, e := h.process(id)
		if d.Status != store.DeliveryProcessed {
			t.Fatalf("%s: delivery %s: %s", filepath.Base(f), d.Status, d.Error)
		}
		statuses[e.Status]++
	}
	t.Logf("event-log statuses over %d fixtures: %v", len(files), statuses)
	if statuses[store.EventLogLockfileMissing] == 0 || statuses[store.EventLogProcessed] == 0 {
		t.Fatalf("statuses %v: want both lock lookups (lockfile_missing) and ignored events (processed)", statuses)
	}
}

// A plain generic delivery matches generic_webhook triggers naming its
// source and, by raw event name, webhook triggers of the same org.
func TestGenericDeliveryMatchesRegistrations(t *testing.T) {
	h := newGHHarness(t)
	regs := []*store.Registration{
		{OrgID: "acme", WorkflowName: "gw", TriggerTypes: []string{"generic_webhook"}, SHA: shaMain,
			Workflow: json.RawMessage(wfJSON("gw", `[{"_type":"generic_webhook","source":"hooks","events":["deploy"]}]`))},
		{OrgID: "acme", WorkflowName: "wh", TriggerTypes: []string{"webhook"}, SHA: shaMain,
			Workflow: json.RawMessage(wfJSON("wh", `[{"_type":"webhook","events":["deploy"]}]`))},
		{OrgID: "other", WorkflowName: "foreign", TriggerTypes: []string{"webhook"}, SHA: shaMain,
			Workflow: json.RawMessage(wfJSON("foreign", `[{"_type":"webhook","events":["deploy"]}]`))},
	}
	if err := h.st.ReplaceRegistrations(h.ctx, h.src.ID, ghRepo, regs); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hooks", "other-hooks"} {
		if err := h.st.CreateSource(h.ctx, &store.Source{ID: "src-" + name, OrgID: "acme", Name: name, Provider: provider.Generic,
			RoutingKey: "generic:acme:" + name, VerificationMethod: "none", Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		source string
		want   string
	}{{"hooks", "[gw wh]"}, {"other-hooks", "[wh]"}} {
		id := "generic:acme:" + c.source + ":1"
		if err := h.st.AcceptDelivery(h.ctx, &store.Delivery{ID: id, SourceID: "src-" + c.source, OrgID: "acme", Event: "deploy",
			Payload: json.RawMessage(`{"env":"prod"}`)}, &store.EventLogEntry{OrgID: "acme"}); err != nil {
			t.Fatal(err)
		}
		d, tr, _ := h.process(id)
		runs := h.runs(id)
		var names []string
		for n := range runs {
			names = append(names, n)
		}
		sort.Strings(names)
		if d.Status != store.DeliveryProcessed || fmt.Sprint(names) != c.want {
			t.Fatalf("delivery from %s: %s %q, runs %v, want %s (trace %s)", c.source, d.Status, d.Error, names, c.want, tr.Summary)
		}
	}
}
