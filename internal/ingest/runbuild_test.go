package ingest

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"kici.dev/kici/internal/lockfile"
)

// Job ids are time-ordered (version 7 UUIDs): the jobs of a run, and of the
// runs built after it, sort in the order they were built, so their rows
// append to the jobs table's and the dispatch queue's indexes instead of
// landing on random pages.
func TestBuildRunJobIDsAreTimeOrdered(t *testing.T) {
	wf := lockfile.Workflow{Name: "ci", ContentHash: "h", Jobs: []lockfile.Job{{Name: "lint"}, {Name: "build"}, {Name: "test"}}}
	wf.Source.File = ".kici/workflows/ci.yaml"
	var ids []string
	for range 3 {
		_, jobs, err := BuildRun(&wf, RunContext{RepoIdentifier: "a/b", SHA: "abc"})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			u, err := uuid.Parse(j.ID)
			if err != nil {
				t.Fatalf("job %s: id %q: %v", j.JobName, j.ID, err)
			}
			if u.Version() != 7 {
				t.Errorf("job %s: id %s is a version %d UUID, want 7", j.JobName, j.ID, u.Version())
			}
			ids = append(ids, j.ID)
		}
	}
	if !slices.IsSorted(ids) {
		t.Errorf("job ids in build order are not sorted: %v", ids)
	}
	if len(ids) != 9 || len(slices.Compact(slices.Clone(ids))) != 9 {
		t.Errorf("want 9 distinct ids, got %v", ids)
	}
}
