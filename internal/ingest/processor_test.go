package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/testutil/gitrepo"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider/local"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

// ---- real git repository helpers ----

type gitRepo = gitrepo.Repo

func newGitRepo(t *testing.T) *gitRepo { return gitrepo.New(t) }

// ---- lock used by the tests ----

const testLock = `{
  "schemaVersion": 29,
  "source": {"file": ".kici/workflows", "export": "#default"},
  "contentHash": "",
  "workflows": [
    {
      "name": "ci",
      "source": {"file": ".kici/workflows/ci.yaml", "export": "#default"},
      "contentHash": "", "compileSchemaVersion": 5,
      "triggers": [{"_type": "push", "branches": [{"type": "glob", "pattern": "main"}]}],
      "timeout": 3600000,
      "jobs": [
        {"_type": "static", "name": "build", "runsOn": [{"kind": "exact", "value": "linux"}], "runsOnPick": "deterministic",
         "needs": [], "steps": [{"name": "compile", "hasOutputs": false, "run": "echo build"}], "timeout": 600000},
        {"_type": "static", "name": "test", "runsOn": [{"kind": "exact", "value": "linux"}, {"kind": "exact", "value": "docker"}],
         "runsOnPick": "deterministic", "needs": ["build"],
         "steps": [{"name": "unit", "hasOutputs": false, "run": "echo test"}],
         "matrix": {"_type": "static", "values": {"os": ["linux"], "go": ["1.22", "1.23"]}}},
        {"_type": "static", "name": "deploy", "runsOn": [], "runsOnPick": "deterministic",
         "needs": [{"name": "test", "runOn": ["success", "skipped"]}, "build"],
         "steps": [{"name": "ship", "hasOutputs": false, "run": "echo ship"}]}
      ]
    },
    {
      "name": "docs",
      "source": {"file": ".kici/workflows/docs.yaml", "export": "#default"},
      "contentHash": "", "compileSchemaVersion": 5,
      "triggers": [{"_type": "push", "branches": [{"type": "glob", "pattern": "main"}], "paths": ["docs/**", "!docs/drafts/**"]}],
      "jobs": [
        {"_type": "static", "name": "site", "runsOn": [], "runsOnPick": "deterministic", "needs": [],
         "steps": [{"name": "render", "hasOutputs": false, "run": "echo docs"}]}
      ]
    },
    {
      "name": "release",
      "source": {"file": ".kici/workflows/release.yaml", "export": "#default"},
      "contentHash": "", "compileSchemaVersion": 5,
      "triggers": [{"_type": "push", "branches": [{"type": "glob", "pattern": "release/**"}]}],
      "jobs": [
        {"_type": "static", "name": "publish", "runsOn": [], "runsOnPick": "deterministic", "needs": [],
         "steps": [{"name": "publish", "hasOutputs": false, "run": "echo publish"}]}
      ]
    }
  ]
}
`

// ---- harness ----

type countingEnqueuer struct {
	st    store.Store
	mu    sync.Mutex
	calls []string
	runs  []string // run id of each call, in call order
}

func (e *countingEnqueuer) EnqueueJob(ctx context.Context, job *store.Job) error {
	e.mu.Lock()
	e.calls = append(e.calls, job.JobName)
	e.runs = append(e.runs, job.RunID)
	e.mu.Unlock()
	return e.st.Enqueue(ctx, &store.QueueEntry{ID: job.ID, RunID: job.RunID, JobName: job.JobName,
		RunsOnLabels: job.RunsOnLabels, Status: store.QueuePending, CreatedAt: time.Now().UTC()})
}

type harness struct {
	t    *testing.T
	ctx  context.Context
	st   store.Store
	enq  *countingEnqueuer
	proc *Processor
	repo *gitRepo
	src  *store.Source
	n    int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	enq := &countingEnqueuer{st: st}
	tr := runs.NewTracker(st, enq, nil, runs.TrackerDeps{})
	h := &harness{t: t, ctx: ctx, st: st, enq: enq, proc: NewProcessor(st, tr, nil, ProcessorDeps{}), repo: newGitRepo(t)}
	h.src = &store.Source{ID: "src-1", OrgID: "acme", Name: "app", Provider: provider.Local, RoutingKey: "generic:acme:src-1",
		LocalPath: h.repo.Dir, VerificationMethod: "hmac_sha256", WebhookSecret: "x", Enabled: true, CreatedAt: time.Now().UTC()}
	if err := st.CreateSource(ctx, h.src); err != nil {
		t.Fatal(err)
	}
	return h
}

// deliver persists a push delivery and returns its id.
func (h *harness) deliver(ref, before, after string) string {
	h.t.Helper()
	h.n++
	payload, _ := json.Marshal(map[string]any{
		"ref": ref, "before": before, "after": after,
		"repository": map[string]string{"full_name": "acme/app", "path": h.repo.Dir},
		"sender":     map[string]string{"login": "dev"},
	})
	id := fmt.Sprintf("%s:d-%d", h.src.RoutingKey, h.n)
	if err := h.st.InsertDelivery(h.ctx, &store.Delivery{ID: id, SourceID: h.src.ID, OrgID: "acme", Event: "push",
		Payload: payload, Status: store.DeliveryReceived, ReceivedAt: time.Now().UTC()}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

func (h *harness) process(id string) (*store.Delivery, *Trace) {
	h.t.Helper()
	if err := h.proc.Process(h.ctx, id); err != nil {
		h.t.Fatalf("Process: %v", err)
	}
	return h.delivery(id)
}

func (h *harness) delivery(id string) (*store.Delivery, *Trace) {
	h.t.Helper()
	d, err := h.st.GetDelivery(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	var tr Trace
	if len(d.Decisions) > 0 {
		if err := json.Unmarshal(d.Decisions, &tr); err != nil {
			h.t.Fatalf("decisions %s: %v", d.Decisions, err)
		}
	}
	return d, &tr
}

func (h *harness) runsOf(id string) map[string]*store.Run {
	h.t.Helper()
	return runsByWorkflow(h.t, h.st, id)
}

// runsByWorkflow returns the runs of delivery id by workflow name.
func runsByWorkflow(t *testing.T, st store.Store, id string) map[string]*store.Run {
	t.Helper()
	runs, _, err := st.ListRuns(context.Background(), store.RunFilter{DeliveryID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*store.Run{}
	for _, r := range runs {
		out[r.WorkflowName] = r
	}
	return out
}

func decisionOf(tr *Trace, name string) (matched bool, found bool) {
	for _, d := range tr.Workflows {
		if d.Name == name {
			return d.Matched, true
		}
	}
	return false, false
}

// ---- tests ----

func TestPushOnMainCreatesRunsWithMatrixLegs(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	h.repo.Write("src/main.go", "package main\n")
	c1 := h.repo.Commit("initial")
	h.repo.Write("docs/guide.md", "# guide\n")
	c2 := h.repo.Commit("docs")

	id := h.deliver("refs/heads/main", c1, c2)
	d, tr := h.process(id)
	if d.Status != store.DeliveryProcessed || d.Error != "" || d.ProcessedAt == nil {
		t.Fatalf("delivery %+v", d)
	}
	if len(tr.Workflows) != 3 || tr.SHA != c2 || tr.Ref != "refs/heads/main" {
		t.Fatalf("trace %+v", tr)
	}
	for name, want := range map[string]bool{"ci": true, "docs": true, "release": false} {
		if m, ok := decisionOf(tr, name); !ok || m != want {
			t.Errorf("decision %s matched=%v found=%v, want %v", name, m, ok, want)
		}
	}
	if !slices.Equal(tr.ChangedFiles, []string{"docs/guide.md"}) {
		t.Errorf("changed files %v", tr.ChangedFiles)
	}
	runs := h.runsOf(id)
	if len(runs) != 2 || len(tr.Runs) != 2 {
		t.Fatalf("runs %v trace runs %v", runs, tr.Runs)
	}
	ci := runs["ci"]
	if ci.Status != status.RunPending || ci.Provider != provider.Local || ci.RepoIdentifier != "acme/app" ||
		ci.RepoURL != "file://"+h.repo.Dir || ci.Ref != "refs/heads/main" || ci.SHA != c2 ||
		ci.OrgID != "acme" || ci.SourceID != "src-1" || ci.TriggeredBy != "dev" || ci.TimeoutMs != 3600000 {
		t.Fatalf("ci run %+v", ci)
	}
	jobs, err := h.st.ListJobs(h.ctx, ci.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*store.Job{}
	var names []string
	for _, j := range jobs {
		byName[j.JobName] = j
		names = append(names, j.JobName)
	}
	wantNames := []string{"build", "test (1.22, linux)", "test (1.23, linux)", "deploy"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("jobs %q, want %q", names, wantNames)
	}
	b := byName["build"]
	if b.Status != status.JobQueued || !slices.Equal(b.RunsOnLabels, []string{"linux"}) || b.TimeoutMs != 600000 || len(b.Needs) != 0 {
		t.Fatalf("build %+v", b)
	}
	var cfg lockfile.Job
	if err := json.Unmarshal(b.Config, &cfg); err != nil || cfg.Name != "build" || len(cfg.Steps) != 1 || cfg.Steps[0].Run != "echo build" {
		t.Fatalf("build config %s: %v", b.Config, err)
	}
	leg := byName["test (1.23, linux)"]
	if leg.Status != status.JobPending || leg.BaseJobName != "test" || leg.MatrixValues["go"] != "1.23" || leg.MatrixValues["os"] != "linux" ||
		!slices.Equal(leg.RunsOnLabels, []string{"linux", "docker"}) {
		t.Fatalf("test leg %+v", leg)
	}
	if len(leg.Needs) != 1 || leg.Needs[0].Upstream != "build" || !slices.Equal(leg.Needs[0].RunOn, []status.Job{status.JobSuccess}) {
		t.Fatalf("test leg needs %+v", leg.Needs)
	}
	dep := byName["deploy"]
	wantNeeds := []store.Need{
		{Upstream: "test (1.22, linux)", RunOn: []status.Job{status.JobSuccess, status.JobSkipped}},
		{Upstream: "test (1.23, linux)", RunOn: []status.Job{status.JobSuccess, status.JobSkipped}},
		{Upstream: "build", RunOn: []status.Job{status.JobSuccess}},
	}
	if len(dep.Needs) != len(wantNeeds) {
		t.Fatalf("deploy needs %+v", dep.Needs)
	}
	for i, n := range wantNeeds {
		if dep.Needs[i].Upstream != n.Upstream || !slices.Equal(dep.Needs[i].RunOn, n.RunOn) {
			t.Fatalf("deploy need %d = %+v, want %+v", i, dep.Needs[i], n)
		}
	}
	if len(dep.RunsOnLabels) != 0 {
		t.Fatalf("deploy labels %v", dep.RunsOnLabels)
	}
	// Only the root jobs were handed to dispatch: build (ci) and site (docs).
	slices.Sort(h.enq.calls)
	if !slices.Equal(h.enq.calls, []string{"build", "site"}) {
		t.Fatalf("enqueued %v", h.enq.calls)
	}

	// Processing again (replay) changes nothing.
	if err := h.proc.Process(h.ctx, id); err != nil {
		t.Fatal(err)
	}
	if len(h.runsOf(id)) != 2 || len(h.enq.calls) != 2 {
		t.Fatal("replayed Process created more runs")
	}
}

func TestBranchFilterNotMatching(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	h.repo.Git("checkout", "-q", "-b", "feature/x")
	h.repo.Write("docs/a.md", "a\n")
	c2 := h.repo.Commit("feature")

	id := h.deliver("refs/heads/feature/x", c1, c2)
	d, tr := h.process(id)
	if d.Status != store.DeliveryProcessed || len(h.runsOf(id)) != 0 {
		t.Fatalf("delivery %+v runs %v", d, h.runsOf(id))
	}
	if tr.Summary != "0 of 3 workflows matched; 0 runs created" || len(tr.Workflows) != 3 {
		t.Fatalf("trace %+v", tr)
	}
	for _, dec := range tr.Workflows {
		if dec.Matched || len(dec.Checks) == 0 || dec.Summary == "" {
			t.Errorf("decision %+v", dec)
		}
	}
	if !strings.Contains(string(d.Decisions), "feature/x") {
		t.Errorf("trace does not show the evaluated branch: %s", d.Decisions)
	}
}

func TestPathFilterUsesRealChangedFiles(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	h.repo.Write("src/x.go", "package x\n")
	c2 := h.repo.Commit("code only")
	h.repo.Write("docs/drafts/wip.md", "wip\n")
	c3 := h.repo.Commit("draft docs only (excluded)")
	h.repo.Write("docs/drafts/wip.md", "wip2\n")
	h.repo.Write("docs/index.md", "index\n")
	c4 := h.repo.Commit("real docs")

	cases := []struct {
		before, after string
		docs          bool
	}{
		{c1, c2, false},
		{c2, c3, false},
		{c3, c4, true},
		{c1, c4, true},
		{local.ZeroSHA, c4, false}, // branch creation: no changed files
	}
	for _, c := range cases {
		id := h.deliver("refs/heads/main", c.before, c.after)
		d, tr := h.process(id)
		if d.Status != store.DeliveryProcessed {
			t.Fatalf("%s..%s: %+v", c.before[:7], c.after[:7], d)
		}
		m, _ := decisionOf(tr, "docs")
		_, hasRun := h.runsOf(id)["docs"]
		if m != c.docs || hasRun != c.docs {
			t.Errorf("%s..%s: docs matched=%v run=%v want %v (files %v)", c.before[:7], c.after[:7], m, hasRun, c.docs, tr.ChangedFiles)
		}
		if ci, _ := decisionOf(tr, "ci"); !ci {
			t.Errorf("ci should match every push to main")
		}
	}
}

func TestMissingAndCorruptLock(t *testing.T) {
	h := newHarness(t)
	h.repo.Write("README.md", "no lock yet\n")
	c1 := h.repo.Commit("no lock")
	id := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	d, tr := h.process(id)
	if d.Status != store.DeliveryProcessed || d.Error != "" || tr.Summary != "no lock file at "+c1 || len(h.runsOf(id)) != 0 {
		t.Fatalf("missing lock: %+v %+v", d, tr)
	}

	h.repo.Write(lockfile.Path, `{"schemaVersion": 28, "workflows": []}`)
	c2 := h.repo.Commit("old lock")
	id = h.deliver("refs/heads/main", c1, c2)
	d, _ = h.process(id)
	if d.Status != store.DeliveryFailed || !strings.Contains(d.Error, "schema version 28") || len(h.runsOf(id)) != 0 {
		t.Fatalf("corrupt lock: %+v", d)
	}

	h.repo.Write(lockfile.Path, `{"schemaVersion": 29, "workflows": [`)
	c3 := h.repo.Commit("truncated lock")
	id = h.deliver("refs/heads/main", c2, c3)
	d, _ = h.process(id)
	if d.Status != store.DeliveryFailed || !strings.Contains(d.Error, "invalid lock file at "+c3) {
		t.Fatalf("truncated lock: %+v", d)
	}

	// A commit that does not exist in the repository.
	id = h.deliver("refs/heads/main", c2, strings.Repeat("ab", 20))
	d, _ = h.process(id)
	if d.Status != store.DeliveryFailed || !strings.Contains(d.Error, "commit not found") {
		t.Fatalf("unknown commit: %+v", d)
	}
}

func TestWorkflowWithoutJobsFailsDelivery(t *testing.T) {
	h := newHarness(t)
	var doc map[string]any
	if err := json.Unmarshal([]byte(testLock), &doc); err != nil {
		t.Fatal(err)
	}
	wfs := doc["workflows"].([]any)
	empty := wfs[2].(map[string]any)
	empty["name"] = "empty"
	empty["triggers"] = []any{map[string]any{"_type": "push"}}
	empty["jobs"] = []any{}
	data, _ := json.MarshalIndent(doc, "", "  ")
	h.repo.Write(lockfile.Path, string(data))
	c1 := h.repo.Commit("lock with an empty workflow")

	id := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	d, tr := h.process(id)
	if d.Status != store.DeliveryFailed || !strings.Contains(d.Error, `workflow "empty": workflow has no jobs`) {
		t.Fatalf("delivery %+v", d)
	}
	runs := h.runsOf(id)
	if _, ok := runs["empty"]; ok || runs["ci"] == nil {
		t.Fatalf("runs %v (ci should still run, empty must not)", runs)
	}
	if len(tr.Errors) != 1 {
		t.Fatalf("trace errors %v", tr.Errors)
	}
}

func TestDeletedRefAndOtherEvents(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	id := h.deliver("refs/heads/main", c1, local.ZeroSHA)
	d, tr := h.process(id)
	if d.Status != store.DeliveryProcessed || !strings.Contains(tr.Summary, "deleted") {
		t.Fatalf("deleted ref: %+v %+v", d, tr)
	}
	bad := fmt.Sprintf("%s:bad", h.src.RoutingKey)
	if err := h.st.InsertDelivery(h.ctx, &store.Delivery{ID: bad, SourceID: h.src.ID, OrgID: "acme", Event: "push",
		Payload: json.RawMessage(`{"ref":"refs/heads/main","after":"HEAD"}`), Status: store.DeliveryReceived, ReceivedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	d, _ = h.process(bad)
	if d.Status != store.DeliveryFailed || !strings.Contains(d.Error, "invalid commit id") {
		t.Fatalf("bad payload: %+v", d)
	}
}

func TestWorkerSubmitRescanAndAtMostOnce(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")

	// Left over from a "previous process": picked up at Start.
	leftover := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	// A buffer of one: the second Submit is dropped and must come back via
	// the re-scan.
	h.proc.ch = make(chan submitted, 1)
	h.proc.RescanInterval = 100 * time.Millisecond
	a := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	b := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	h.proc.Submit(a)
	h.proc.Submit(b) // dropped
	h.proc.Submit(a) // duplicate submit of the same id: processed once
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	h.proc.Start(ctx)
	for _, id := range []string{leftover, a, b} {
		wait.For(t, 15*time.Second, "delivery "+id, func() bool {
			d, _ := h.delivery(id)
			return d.Status == store.DeliveryProcessed
		})
	}
	// Submitted while running, racing the re-scan.
	c := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	h.proc.Submit(c)
	wait.For(t, 15*time.Second, "delivery c", func() bool {
		d, _ := h.delivery(c)
		return d.Status == store.DeliveryProcessed
	})
	wait.Elapse(t.Context(), 250*time.Millisecond) // a re-scan or two, which must start no second run
	h.proc.Stop()
	h.proc.Stop()
	for _, id := range []string{leftover, a, b, c} {
		if runs := h.runsOf(id); len(runs) != 1 || runs["ci"] == nil {
			t.Fatalf("delivery %s runs %v", id, runs)
		}
	}
	if n := len(h.enq.calls); n != 4 {
		t.Fatalf("enqueued %d jobs, want 4 (one build per delivery)", n)
	}
}

func TestConcurrentProcessSameDelivery(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	id := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := h.proc.Process(h.ctx, id); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	runs, _, err := h.st.ListRuns(h.ctx, store.RunFilter{DeliveryID: id, Limit: 100})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %d (%v), want exactly 1", len(runs), err)
	}
}

// readCounter counts the reads a delivery's scheduling and processing
// could repeat: the delivery row and the runs already stored for it.
type readCounter struct {
	store.Store
	mu                  sync.Mutex
	deliveries, runList int
}

// GetDelivery counts the read and reads.
func (c *readCounter) GetDelivery(ctx context.Context, id string) (*store.Delivery, error) {
	c.mu.Lock()
	c.deliveries++
	c.mu.Unlock()
	return c.Store.GetDelivery(ctx, id)
}

// ListRuns counts the look-up and looks up.
func (c *readCounter) ListRuns(ctx context.Context, f store.RunFilter) ([]*store.Run, int, error) {
	c.mu.Lock()
	c.runList++
	c.mu.Unlock()
	return c.Store.ListRuns(ctx, f)
}

// A delivery handed over as the row the ingress stored is scheduled and
// processed without reading the row again or looking for runs it cannot
// have; one whose runs were stored by an earlier processing still looks
// them up and creates none twice.
func TestSubmittedRowIsNotReadBack(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	rc := &readCounter{Store: h.st}
	h.proc = NewProcessor(rc, runs.NewTracker(h.st, h.enq, nil, runs.TrackerDeps{}), nil, ProcessorDeps{})
	h.proc.RescanInterval = time.Hour
	id := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	d, err := h.st.GetDelivery(h.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	h.proc.Start(ctx)
	defer h.proc.Stop()
	wait.Elapse(ctx, 50*time.Millisecond) // the start-up re-scan, which lists no delivery
	h.proc.SubmitDelivery(d)
	wait.For(t, 15*time.Second, "delivery processed", func() bool {
		got, _ := h.delivery(id)
		return got.Status == store.DeliveryProcessed
	})
	_, tr := h.delivery(id)
	rc.mu.Lock()
	gets, lists := rc.deliveries, rc.runList
	rc.mu.Unlock()
	if len(tr.Runs) == 0 || gets != 0 || lists != 0 {
		t.Fatalf("runs %d, delivery reads %d, run look-ups %d; want runs and no read", len(tr.Runs), gets, lists)
	}

	// The same delivery back to "received" with its runs stored: the
	// claim reports them, the processing looks them up and adds none.
	before, _, err := h.st.ListRuns(h.ctx, store.RunFilter{DeliveryID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	id2 := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	for _, r := range before {
		run, jobs := *r, []*store.Job{{ID: r.ID + "-again", JobName: "build"}}
		run.ID, run.DeliveryID = r.ID+"-again", id2
		if err := h.st.CreateRun(h.ctx, &run, jobs); err != nil {
			t.Fatal(err)
		}
	}
	d2, err := h.st.GetDelivery(h.ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	h.proc.SubmitDelivery(d2)
	wait.For(t, 15*time.Second, "second delivery processed", func() bool {
		got, _ := h.delivery(id2)
		return got.Status == store.DeliveryProcessed
	})
	after, _, err := h.st.ListRuns(h.ctx, store.RunFilter{DeliveryID: id2, Limit: 100})
	if err != nil || len(after) != len(before) {
		t.Fatalf("runs of the re-processed delivery %d (%v), want the %d stored before", len(after), err, len(before))
	}
	rc.mu.Lock()
	lists = rc.runList
	rc.mu.Unlock()
	if lists == 0 {
		t.Fatal("a delivery with stored runs was processed without looking them up")
	}
}
