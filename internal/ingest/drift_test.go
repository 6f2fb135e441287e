package ingest

import (
	"encoding/json"
	"testing"

	"kici.dev/kici/internal/lockfile"
)

// A run built from its own commit's lock carries the drift check; a run of
// the base branch's lock on a fork's code (lockFileSource base) does not,
// since the fork's workflow files are expected to differ from that lock.
func TestBuildRunDriftCheckOnlyForOwnLock(t *testing.T) {
	wf := lockfile.Workflow{Name: "ci", ContentHash: "h", Jobs: []lockfile.Job{{Name: "build"}}}
	wf.Source.File = ".kici/workflows/ci.yaml"
	for _, tc := range []struct {
		lockSource string
		want       bool
	}{{"", true}, {"base", false}} {
		_, jobs, err := BuildRun(&wf, RunContext{RepoIdentifier: "a/b", SHA: "abc", LockFileSource: tc.lockSource})
		if err != nil {
			t.Fatal(err)
		}
		var cfg lockfile.Job
		if err := json.Unmarshal(jobs[0].Config, &cfg); err != nil {
			t.Fatal(err)
		}
		if got := cfg.DriftCheck != nil; got != tc.want {
			t.Errorf("lockFileSource %q: drift check present = %v, want %v", tc.lockSource, got, tc.want)
		}
	}
}
