package approval

import (
	"encoding/json"
	"slices"
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
)

// jobContexts reads the contexts of a job's lock entry as the orchestrator
// stores it (a whole lockfile.Job, steps and all), and refuses an entry it
// cannot read.
func TestJobContextsReadsTheLockEntrysContexts(t *testing.T) {
	entry, err := json.Marshal(lockfile.Job{Type: lockfile.JobStatic, Name: "deploy", Contexts: []string{"release", "prod"},
		Steps: []lockfile.Step{{Name: "s", Run: "make deploy"}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := jobContexts(&store.Job{Config: entry})
	if err != nil || !slices.Equal(got, []string{"release", "prod"}) {
		t.Fatalf("contexts of %s: %v, %v; want [release prod]", entry, got, err)
	}
	none, _ := json.Marshal(lockfile.Job{Type: lockfile.JobStatic, Name: "build", Steps: []lockfile.Step{{Name: "s", Run: "make"}}})
	if got, err := jobContexts(&store.Job{Config: none}); err != nil || len(got) != 0 {
		t.Fatalf("a job without contexts: %v, %v", got, err)
	}
	for _, bad := range []string{`{"contexts": "release"}`, `{"contexts": [1]}`, `{"contexts": [`, `[]`} {
		if got, err := jobContexts(&store.Job{Config: json.RawMessage(bad)}); err == nil {
			t.Errorf("config %s: contexts %v and no error", bad, got)
		}
	}
}
