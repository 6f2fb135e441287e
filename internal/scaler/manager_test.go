package scaler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/testutil/wait"
)

var (
	_ dispatch.Spawner = (*Manager)(nil)
)

// fakeBackend records spawns; each spawn blocks until released (or its ctx
// ends), so tests control how long spawns take. Agents "run" until Destroy
// or end() is called, which reports the exit like a real backend.
type fakeBackend struct {
	name     string
	exited   func(string, error)
	hang     bool // Spawn ignores nothing: waits for ctx or release
	release  chan struct{}
	mu       sync.Mutex
	inSpawn  int
	maxIn    int
	order    []string
	running  map[string]bool
	reqs     []*SpawnRequest
	ctxErrs  []error
	shutdown bool
}

func (f *fakeBackend) Spawn(ctx context.Context, req *SpawnRequest) error {
	f.mu.Lock()
	f.inSpawn++
	f.maxIn = max(f.maxIn, f.inSpawn)
	f.order = append(f.order, req.JobID)
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inSpawn--
		f.mu.Unlock()
	}()
	if f.release != nil || f.hang {
		select {
		case <-f.release:
		case <-ctx.Done():
			f.mu.Lock()
			f.ctxErrs = append(f.ctxErrs, ctx.Err())
			f.mu.Unlock()
			return ctx.Err()
		}
	}
	f.mu.Lock()
	f.running[req.AgentID] = true
	f.mu.Unlock()
	return nil
}

func (f *fakeBackend) runningCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running)
}

func (f *fakeBackend) end(id string) {
	f.mu.Lock()
	was := f.running[id]
	delete(f.running, id)
	f.mu.Unlock()
	if was {
		f.exited(id, nil)
	}
}

func (f *fakeBackend) Destroy(_ context.Context, id string) error {
	go f.end(id)
	return nil
}

func (f *fakeBackend) Shutdown(context.Context) {
	f.mu.Lock()
	f.shutdown = true
	ids := []string{}
	for id := range f.running {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.end(id)
	}
}

type fakeTokens struct {
	mu      sync.Mutex
	ttls    map[string]time.Duration
	labels  [][]string // label scope of each minted token
	revoked []string   // agent ids whose tokens were revoked
}

func (f *fakeTokens) IssueEphemeralFor(_ context.Context, id string, labels []string, ttl time.Duration) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ttls[id] = ttl
	f.labels = append(f.labels, labels)
	return "kat_" + id, nil
}

func (f *fakeTokens) RevokeBound(_ context.Context, id string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, id)
	return 1, nil
}

type liveSettings struct {
	ttl, timeout atomic.Int64
}

func (s *liveSettings) AgentTokenTTL(context.Context) time.Duration {
	return time.Duration(s.ttl.Load())
}
func (s *liveSettings) ScalerSpawnTimeout(context.Context) time.Duration {
	return time.Duration(s.timeout.Load())
}

type memLog struct {
	mu    sync.Mutex
	lines map[string][]string
}

func (l *memLog) Append(runID, jobID string, step int, lines []protocol.LogLine) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ln := range lines {
		l.lines[jobID] = append(l.lines[jobID], ln.Text)
	}
	return nil
}

func (l *memLog) text(job string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[job], "\n")
}

type mgrFixture struct {
	m        *Manager
	backends map[string]*fakeBackend
	tokens   *fakeTokens
	settings *liveSettings
	log      *memLog
	mu       sync.Mutex
	exits    map[string]error
	mkHang   bool
	mkRel    chan struct{}
}

func newMgr(t *testing.T, doc string) *mgrFixture {
	t.Helper()
	cfg, err := scalerconfig.Parse("test.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f := &mgrFixture{backends: map[string]*fakeBackend{}, tokens: &fakeTokens{ttls: map[string]time.Duration{}},
		settings: &liveSettings{}, log: &memLog{lines: map[string][]string{}}, exits: map[string]error{}}
	f.settings.ttl.Store(int64(time.Hour))
	f.settings.timeout.Store(int64(5 * time.Second))
	f.m, err = NewManager(cfg, Options{Tokens: f.tokens, Settings: f.settings, Exited: f.recordExit, OrchestratorURL: "ws://127.0.0.1:1/ws",
		Events: f.log, FailureBackoff: time.Minute,
		Backends: func(e *Entry, exited func(string, error)) (Backend, error) {
			b := &fakeBackend{name: e.Name, exited: exited, running: map[string]bool{}, hang: f.mkHang, release: f.mkRel}
			f.backends[e.Name] = b
			return b, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.m.Shutdown(ctx)
	})
	return f
}

func (f *mgrFixture) exit(id string) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, ok := f.exits[id]
	return err, ok
}

const twoScalers = `version: 1
globalMaxAgents: 3
scalers:
  - name: small
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [linux]
      - labels: [linux, docker, big]
  - name: gpu
    type: bare-metal
    maxAgents: 5
    mandatoryLabels: [gpu]
    labelSets:
      - labels: [linux, gpu]
`

func TestFindBackendMatching(t *testing.T) {
	f := newMgr(t, twoScalers)
	f.m.mu.Lock()
	scalers := f.m.scalers
	f.m.mu.Unlock()
	cases := []struct {
		runsOn, exclude []string
		scaler, first   string
		ok              bool
	}{
		{nil, nil, "small", "linux", true},                              // empty runsOn: first gate-free set
		{[]string{"linux"}, nil, "small", "linux", true},                // fewest labels wins
		{[]string{"Docker"}, nil, "small", "linux", true},               // subset of the bigger set, lower-cased
		{[]string{"linux", "gpu"}, nil, "gpu", "linux", true},           // gate satisfied
		{[]string{"gpu"}, nil, "gpu", "linux", true},                    // gate satisfied, subset
		{[]string{"linux", "docker", "gpu"}, nil, "", "", false},        // not a subset of any set
		{[]string{"kici:os:linux"}, nil, "small", "linux", true},        // platform labels count
		{[]string{"kici:scaler:gpu", "gpu"}, nil, "gpu", "linux", true}, // scaler selector
		{[]string{"kici:os:windows"}, nil, "", "", false},
		{[]string{"linux"}, []string{"kici:scaler:small"}, "", "", false}, // gpu's gate is not met
		{[]string{"docker"}, []string{"big"}, "", "", false},
	}
	for _, tc := range cases {
		c, ok := findBackend(scalers, tc.runsOn, tc.exclude)
		if ok != tc.ok || (ok && (c.sc.entry.Name != tc.scaler || len(c.ls.Labels) == 0)) {
			t.Errorf("runsOn %v exclude %v: got %v ok=%v, want %s", tc.runsOn, tc.exclude, c.sc, ok, tc.scaler)
			continue
		}
		if ok && tc.runsOn != nil && tc.runsOn[0] == "Docker" && len(c.ls.Labels) != 3 {
			t.Errorf("docker matched %v", c.ls.Labels)
		}
	}
}

func TestReservationsCapsAndTokenTTL(t *testing.T) {
	f := newMgr(t, twoScalers)
	ctx := context.Background()
	spawn := func(job string, labels ...string) (string, error) {
		return f.m.SpawnFor(ctx, dispatch.ScaleRequest{JobID: job, RunID: "r1", RunsOn: labels})
	}
	a1, err := spawn("j1", "linux")
	if err != nil || !strings.HasPrefix(a1, "scaler-bare-metal-") || len(a1) != len("scaler-bare-metal-")+8 {
		t.Fatalf("spawn 1: %q %v", a1, err)
	}
	wait.For(t, 5*time.Second, "first agent running", func() bool { return f.m.Status().Scalers[0].SpawnedTotal == 1 })
	f.settings.ttl.Store(int64(2 * time.Minute)) // live change: the next spawn's token
	a2, err := spawn("j2", "linux")
	if err != nil {
		t.Fatal(err)
	}
	_, err = spawn("j3", "linux")
	if !errors.Is(err, ErrAtCapacity) || !strings.Contains(err.Error(), "scaler small: 2/2 agents") {
		t.Fatalf("per-scaler cap: %v", err)
	}
	g1, err := spawn("j4", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	_, err = spawn("j5", "gpu")
	if !errors.Is(err, ErrAtCapacity) || !strings.Contains(err.Error(), "global: 3/3") {
		t.Fatalf("global cap: %v", err)
	}
	if _, err := spawn("j6", "windows"); !errors.Is(err, dispatch.ErrNoBackend) {
		t.Fatalf("no backend: %v", err)
	}
	wait.For(t, 5*time.Second, "three running agents", func() bool {
		return f.m.Status().Active == 3 && f.backends["small"].runningCount()+f.backends["gpu"].runningCount() == 3
	})
	f.tokens.mu.Lock()
	t1, t2 := f.tokens.ttls[a1], f.tokens.ttls[a2]
	f.tokens.mu.Unlock()
	if t1 != time.Hour || t2 != 2*time.Minute {
		t.Fatalf("token ttls %v %v, want 1h then 2m (read per spawn)", t1, t2)
	}
	// The dispatcher asks again for a waiting job on every pass: a refusal
	// counts the job once, not each retry.
	for range 5 {
		if _, err := spawn("j3", "linux"); !errors.Is(err, ErrAtCapacity) {
			t.Fatalf("retry of j3: %v", err)
		}
	}
	st := f.m.Status()
	if st.Scalers[0].RefusedTotal != 1 || st.Scalers[1].RefusedTotal != 1 || st.Scalers[0].SpawnedTotal != 2 {
		t.Fatalf("status %+v, want one refusal per refused job", st)
	}
	f.backends["small"].mu.Lock()
	req := f.backends["small"].reqs[0]
	f.backends["small"].mu.Unlock()
	if req.Token != "kat_"+a1 || req.OrchestratorURL != "ws://127.0.0.1:1/ws" || req.JobID != "j1" || req.LabelSet.Labels[0] != "linux" {
		t.Fatalf("spawn request %+v", req)
	}
	// An agent ending frees its reservation and is reported.
	f.backends["gpu"].end(g1)
	wait.For(t, 5*time.Second, "exit reported", func() bool { _, ok := f.exit(g1); return ok })
	// Its token dies with it, and every token was minted with the label
	// set it was spawned for as its fixed label scope.
	f.tokens.mu.Lock()
	revoked, scopes := append([]string(nil), f.tokens.revoked...), f.tokens.labels
	f.tokens.mu.Unlock()
	if !slices.Contains(revoked, g1) || slices.Contains(revoked, a1) {
		t.Fatalf("revoked tokens %v: want %s's, not %s's", revoked, g1, a1)
	}
	// Spawns run in the background, so tokens are minted in any order: two
	// for the small scaler's label set, one for the gpu scaler's; a
	// bare-metal agent's token also lists this host (tokenScope).
	hostname, _ := os.Hostname()
	linux, gpu := 0, 0
	for _, sc := range scopes {
		switch {
		case slices.Equal(sc, []string{"linux", "kici:host:" + hostname}):
			linux++
		case slices.Contains(sc, "gpu"):
			gpu++
		}
	}
	if len(scopes) != 3 || linux != 2 || gpu != 1 {
		t.Fatalf("token label scopes %v", scopes)
	}
	if _, err := spawn("j5", "linux"); !errors.Is(err, ErrAtCapacity) || !strings.Contains(err.Error(), "scaler small") {
		t.Fatalf("after the gpu agent ended, small is still full: %v", err)
	}
	if _, err := spawn("j5", "gpu"); err != nil {
		t.Fatalf("freed global slot: %v", err)
	}
	if log := f.log.text("j1"); !strings.Contains(log, "[scaler.provisioning]") || !strings.Contains(log, "[scaler.ready]") || !strings.Contains(log, a1) {
		t.Fatalf("provisioning log of j1:\n%s", log)
	}
}

func TestSpawnSemaphoreFIFOAndConcurrency(t *testing.T) {
	rel := make(chan struct{})
	fx := newMgrWith(t, `version: 1
scalers:
  - name: s
    type: bare-metal
    maxAgents: 6
    maxConcurrentSpawns: 2
    labelSets: [{labels: [x]}]
`, false, rel)
	fx.settings.timeout.Store(int64(time.Minute)) // spawns here wait for the test, not a deadline
	for i := range 6 {
		if _, err := fx.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: fmt.Sprintf("j%d", i), RunsOn: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
		// Arrival order must be the grant order: let each spawn reach the
		// semaphore before the next arrives.
		wait.For(t, 5*time.Second, fmt.Sprintf("spawn %d at the semaphore", i), func() bool {
			fx.m.mu.Lock()
			sem := fx.m.scalers[0].sem
			fx.m.mu.Unlock()
			return semLoad(sem) == i+1
		})
	}
	b := fx.backends["s"]
	wait.For(t, 5*time.Second, "two spawns in flight", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.inSpawn == 2 })
	wait.Until(5*time.Second, func() bool { st := fx.m.Status().Scalers[0]; return st.Spawning == 2 && st.Queued == 4 })
	st := fx.m.Status().Scalers[0]
	if st.Spawning != 2 || st.Queued != 4 || st.Active != 6 {
		t.Fatalf("status %+v", st)
	}
	for range 6 {
		rel <- struct{}{}
	}
	wait.For(t, 5*time.Second, "all running", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.running) == 6 })
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.maxIn != 2 {
		t.Fatalf("max concurrent spawns %d, want 2", b.maxIn)
	}
	// The first two arrivals get the two slots; the grant order itself is
	// checked in TestFifoSemOrder (here releases race with each other).
	first := []string{b.order[0], b.order[1]}
	sort.Strings(first)
	if strings.Join(first, ",") != "j0,j1" || len(b.order) != 6 {
		t.Fatalf("spawn order %v", b.order)
	}
}

func newMgrWith(t *testing.T, doc string, hang bool, rel chan struct{}) *mgrFixture {
	t.Helper()
	cfg, err := scalerconfig.Parse("test.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f := &mgrFixture{backends: map[string]*fakeBackend{}, tokens: &fakeTokens{ttls: map[string]time.Duration{}},
		settings: &liveSettings{}, log: &memLog{lines: map[string][]string{}}, exits: map[string]error{}}
	f.settings.ttl.Store(int64(time.Hour))
	f.settings.timeout.Store(int64(300 * time.Millisecond))
	f.m, err = NewManager(cfg, Options{Tokens: f.tokens, Settings: f.settings, Exited: f.recordExit, Events: f.log, FailureBackoff: time.Minute,
		Backends: func(e *Entry, exited func(string, error)) (Backend, error) {
			b := &fakeBackend{name: e.Name, exited: exited, running: map[string]bool{}, hang: hang, release: rel}
			f.backends[e.Name] = b
			return b, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.m.Shutdown(ctx)
	})
	return f
}

func TestSpawnDeadlineCancelsAndReleases(t *testing.T) {
	f := newMgrWith(t, `version: 1
scalers:
  - name: s
    type: bare-metal
    maxAgents: 1
    maxConcurrentSpawns: 1
    labelSets: [{labels: [x]}]
`, true, nil)
	start := time.Now()
	id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j1", RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the failure reported", func() bool { _, ok := f.exit(id); return ok })
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("spawn aborted after %v, want at the 300ms deadline", d)
	}
	exitErr, _ := f.exit(id)
	if exitErr == nil || !strings.Contains(exitErr.Error(), "spawn deadline of 300ms exceeded") {
		t.Fatalf("exit error %v", exitErr)
	}
	b := f.backends["s"]
	wait.For(t, 5*time.Second, "backend ctx cancelled", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.ctxErrs) == 1 })
	if !errors.Is(b.ctxErrs[0], context.DeadlineExceeded) {
		t.Fatalf("backend saw %v", b.ctxErrs[0])
	}
	if st := f.m.Status(); st.Active != 0 || st.Scalers[0].Spawning != 0 || st.Scalers[0].FailedTotal != 1 {
		t.Fatalf("reservation not released: %+v", st)
	}
	// The job's next request shows the failure (its pending reason) during
	// the backoff instead of spawning again; other jobs may spawn.
	_, err = f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j1"})
	if err == nil || errors.Is(err, ErrAtCapacity) || !strings.Contains(err.Error(), "scaler s: agent "+id+": spawn deadline of 300ms exceeded (next attempt after ") {
		t.Fatalf("retry during backoff: %v", err)
	}
	if _, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j2"}); err != nil {
		t.Fatalf("the freed slot is usable: %v", err)
	}
	if log := f.log.text("j1"); !strings.Contains(log, "[scaler.failed]") {
		t.Fatalf("provisioning log:\n%s", log)
	}
}

func TestStopCancelsSpawnAndDestroysAgent(t *testing.T) {
	rel := make(chan struct{})
	f := newMgrWith(t, `version: 1
scalers:
  - name: s
    type: bare-metal
    maxAgents: 2
    maxConcurrentSpawns: 1
    labelSets: [{labels: [x]}]
`, false, rel)
	f.settings.timeout.Store(int64(time.Minute))
	a, _ := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j1"})
	rel <- struct{}{}
	wait.For(t, 5*time.Second, "a running", func() bool { return f.m.Status().Scalers[0].Agents[0].State == AgentRunning })
	b2, _ := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j2"})
	wait.For(t, 5*time.Second, "b spawning", func() bool { return f.m.Status().Scalers[0].Spawning == 1 })
	f.m.Stop(b2) // in flight: cancelled
	f.m.Stop(a)  // running: destroyed
	wait.For(t, 5*time.Second, "both gone", func() bool { return f.m.Status().Active == 0 })
	_, okA := f.exit(a)
	_, okB := f.exit(b2)
	if !okA || !okB {
		t.Fatalf("exits reported a=%v b=%v", okA, okB)
	}
	// A cancelled spawn is no failure: the job may spawn again at once.
	if _, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j2"}); err != nil {
		t.Fatalf("respawn after Stop: %v", err)
	}
}

func TestReloadAtomicRetireAndTypeChange(t *testing.T) {
	f := newMgr(t, twoScalers)
	ctx := context.Background()
	g, err := f.m.SpawnFor(ctx, dispatch.ScaleRequest{JobID: "j1", RunsOn: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "gpu agent running", func() bool { return f.backends["gpu"].runningCount() == 1 })

	// A type change is refused and nothing changes.
	bad, err := scalerconfig.Parse("new.yaml", []byte(strings.Replace(twoScalers, "name: gpu\n    type: bare-metal", "name: gpu\n    type: container", 1)+"        image: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Reload(bad); err == nil || !strings.Contains(err.Error(), "cannot change from bare-metal to container") {
		t.Fatalf("type change: %v", err)
	}
	if st := f.m.Status(); len(st.Scalers) != 2 || st.Scalers[1].Retiring || st.Reloads != 0 {
		t.Fatalf("after refused reload: %+v", st)
	}

	// Remove gpu, add cpu, raise small's caps.
	next, err := scalerconfig.Parse("new.yaml", []byte(`version: 1
globalMaxAgents: 10
scalers:
  - name: small
    type: bare-metal
    maxAgents: 4
    maxConcurrentSpawns: 3
    labelSets: [{labels: [linux]}]
  - name: cpu
    type: bare-metal
    maxAgents: 1
    labelSets: [{labels: [cpu]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Reload(next); err != nil {
		t.Fatal(err)
	}
	st := f.m.Status()
	if len(st.Scalers) != 3 || st.Scalers[0].MaxAgents != 4 || st.Scalers[1].Name != "cpu" || !st.Scalers[2].Retiring || st.Scalers[2].Active != 1 {
		t.Fatalf("after reload: %+v", st)
	}
	if _, err := f.m.SpawnFor(ctx, dispatch.ScaleRequest{JobID: "j2", RunsOn: []string{"gpu"}}); !errors.Is(err, dispatch.ErrNoBackend) {
		t.Fatalf("retired scaler still routable: %v", err)
	}
	if f.backends["gpu"].shutdown {
		t.Fatal("retired backend shut down while its agent runs")
	}
	// Its agent finishes: the backend goes away.
	f.backends["gpu"].end(g)
	wait.For(t, 5*time.Second, "retired backend shut down", func() bool {
		b := f.backends["gpu"]
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.shutdown
	})
	if st := f.m.Status(); len(st.Scalers) != 2 {
		t.Fatalf("retired scaler still listed: %+v", st)
	}
}

func TestFifoSemCancelPassesSlot(t *testing.T) {
	s := newFifoSem(1)
	if err := s.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { errc <- s.Acquire(ctx) }()
	wait.For(t, 5*time.Second, "the second Acquire to queue", func() bool { return semLoad(s) == 2 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	s.Release()
	if s.Held() != 0 {
		t.Fatalf("held %d after cancelled waiter and release", s.Held())
	}
	s.Resize(2)
	_ = s.Acquire(context.Background())
	_ = s.Acquire(context.Background())
	if s.Held() != 2 {
		t.Fatal("resize")
	}
}

// semLoad is how many callers hold s or wait in its queue.
func semLoad(s *fifoSem) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held + len(s.waiters)
}

func TestFifoSemOrder(t *testing.T) {
	s := newFifoSem(1)
	_ = s.Acquire(context.Background())
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Acquire(context.Background())
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			s.Release()
		}()
		wait.For(t, 5*time.Second, fmt.Sprintf("waiter %d to queue", i), func() bool { return semLoad(s) == i+2 }) // queue in order
	}
	s.Release()
	wg.Wait()
	if fmt.Sprint(order) != "[0 1 2 3 4 5 6 7]" {
		t.Fatalf("grant order %v, want arrival order", order)
	}
	if s.Held() != 0 {
		t.Fatalf("held %d", s.Held())
	}
}

// recordExit is the fixture's Options.Exited: it keeps each exit's error.
func (f *mgrFixture) recordExit(id string, err error) {
	f.mu.Lock()
	f.exits[id] = err
	f.mu.Unlock()
}
