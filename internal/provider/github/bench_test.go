package github

import (
	"os"
	"path/filepath"
	"testing"

	"kici.dev/kici/internal/trigger"
)

// BenchmarkNormalizeAndMatch measures one pull_request delivery (a 25 KB
// real payload) through the normalizer and the matcher of a lock with one
// workflow per trigger kind.
func BenchmarkNormalizeAndMatch(b *testing.B) {
	body, err := os.ReadFile(filepath.Join(fixturesDir(b), "pull_request.opened.1.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		ev, _, err := Normalize("pull_request", body)
		if err != nil {
			b.Fatal(err)
		}
		trigger.MatchAll(fuzzLock, ev)
	}
}
