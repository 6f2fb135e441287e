package ingest

import (
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/trigger"
)

// BenchmarkMatchPush measures trigger matching of one push against every
// workflow of a lock (branch globs and path filters).
func BenchmarkMatchPush(b *testing.B) {
	lf, err := lockfile.Parse([]byte(testLock))
	if err != nil {
		b.Fatal(err)
	}
	ev := &trigger.Event{Type: "push", TargetBranch: "main", Provider: provider.Local, SourceRepo: "acme/app",
		ChangedFiles: []string{"src/main.go", "docs/guide.md", "docs/drafts/x.md"}}
	for b.Loop() {
		for i := range lf.Workflows {
			trigger.MatchWorkflow(&lf.Workflows[i], ev)
		}
	}
}
