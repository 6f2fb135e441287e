package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// fakeLibraries answers library refs from a map; other refs are
// unreachable.
type fakeLibraries map[string]string

func (f fakeLibraries) Resolve(_ context.Context, url, ref string) (string, error) {
	if c, ok := f[url+"@"+ref]; ok {
		return c, nil
	}
	return "", errors.New("git ls-remote " + url + ": connection refused")
}

// TestRunShowsLibraryDrift: a run of a workflow whose library tag moved
// since compile carries the drift in its jobs' drift check (the agent
// writes it into the setup log as a warning), and so does a library that
// cannot be reached; the runs are created either way, and a library
// pinned at a full commit id is not asked.
func TestRunShowsLibraryDrift(t *testing.T) {
	h := newHarness(t)
	const locked, moved = "4f0c9b2a1d7e0000000000000000000000000000", "7d2e01ab93c40000000000000000000000000000"
	h.proc = NewProcessor(h.st, runs.NewTracker(h.st, h.enq, nil, runs.TrackerDeps{}), nil, ProcessorDeps{
		Libraries: fakeLibraries{"https://git.example/ci.git@v3": moved}})
	withPieces := func(name, git, ref string) string {
		wf := wfJSON(name, `[{"_type":"push"}]`)
		return strings.TrimSuffix(wf, "}") + `,"pieces":[{"file":"p/build.yaml","library":"ci","git":"` + git +
			`","ref":"` + ref + `","commit":"` + locked + `","contentHash":"x"}]}`
	}
	h.repo.Write(lockfile.Path, string(lockJSON(
		withPieces("moved", "https://git.example/ci.git", "v3"),
		withPieces("unreachable", "https://down.example/ci.git", "main"),
		withPieces("pinned", "https://down.example/ci.git", locked),
	)))
	c := h.repo.Commit("lock")
	id := h.deliver("refs/heads/main", strings.Repeat("0", 40), c)
	d, tr := h.process(id)
	runs := h.runsOf(id)
	if d.Status != store.DeliveryProcessed || len(runs) != 3 {
		t.Fatalf("delivery %s (%s), runs %v: want all three runs (drift never stops a run)", d.Status, d.Error, runs)
	}
	driftOf := func(wf string) []string {
		t.Helper()
		jobs, err := h.st.ListJobs(h.ctx, runs[wf].ID)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("jobs of %s: %v %v", wf, jobs, err)
		}
		var cfg lockfile.Job
		if err := json.Unmarshal(jobs[0].Config, &cfg); err != nil || cfg.DriftCheck == nil {
			t.Fatalf("config of %s: %s", wf, jobs[0].Config)
		}
		return cfg.DriftCheck.LibraryDrift
	}
	want := "library drift: library ci ref v3 now resolves to 7d2e01ab93c4; the lock has 4f0c9b2a1d7e (piece ci:p/build.yaml)"
	if got := driftOf("moved"); len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("moved: %q, want %q…", got, want)
	}
	if got := driftOf("unreachable"); len(got) != 1 || !strings.Contains(got[0], "library drift not checked: library ci (https://down.example/ci.git) ref main") ||
		!strings.Contains(got[0], "connection refused") {
		t.Errorf("unreachable: %q", got)
	}
	if got := driftOf("pinned"); len(got) != 0 {
		t.Errorf("pinned at a commit: %q, want no check", got)
	}
	// The delivery trace carries them for the run page, by workflow.
	if len(tr.Warnings) != 2 || !strings.HasPrefix(tr.Warnings[0], `workflow "moved": `+want) ||
		!strings.HasPrefix(tr.Warnings[1], `workflow "unreachable": library drift not checked`) {
		t.Errorf("trace warnings = %q", tr.Warnings)
	}
}
