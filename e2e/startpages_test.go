package e2e

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/startpages"
	"kici.dev/kici/internal/testutil/wait"
)

// TestOrchestratorReleasesNodeStartupPages starts the real orchestrator
// and watches its resident file pages: once its node's own start-up has
// settled (recovery, every background loop's first pass), the pages of the
// binary only that start-up touched are unmapped a second time, so the
// orchestrator maps clearly fewer of them afterwards than while it settled.
func TestOrchestratorReleasesNodeStartupPages(t *testing.T) {
	o := startOrchestrator(t, "KICI_LOG_LEVEL=debug")
	pid := o.cmd.Process.Pid
	fileKB := func() int {
		r, err := startpages.ResidentOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		return r.File
	}
	const line = "released the start-up pages of the orchestrator binary"
	logged := func(attr string) bool {
		b, _ := os.ReadFile(o.logPath)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, line) && strings.Contains(l, attr) {
				return true
			}
		}
		return false
	}
	// The process's own release, before its node starts, is logged
	// without an "after" attribute.
	wait.For(t, 10*time.Second, "the orchestrator's first release", func() bool { return logged("level=DEBUG") })
	// settling is the highest reading over the two seconds after that
	// first release, while the node starts and well before the release once
	// it has settled (5 s after the first); after is the lowest over the
	// second after that release was logged, before the idle node's next
	// passes map some of the pages again.
	settledRelease := func() bool { return logged(`after="node start-up"`) }
	settling, after := 0, 0
	start := time.Now()
	var released time.Time
	for ctx := t.Context(); wait.Elapse(ctx, 50*time.Millisecond); {
		kb := fileKB()
		switch {
		case time.Since(start) < 2*time.Second:
			settling = max(settling, kb)
		case released.IsZero():
			if settledRelease() {
				released, after = time.Now(), kb
			} else if time.Since(start) > 20*time.Second {
				t.Fatalf("the orchestrator did not log %q after its node's start-up in 20 s", line)
			}
		default:
			after = min(after, kb)
		}
		if !released.IsZero() && time.Since(released) > time.Second {
			break
		}
	}
	t.Logf("resident file pages: %d KB while the node settled, %d KB after the release", settling, after)
	// This suite's build read 2.6–5.4 MB fewer after the release than
	// before it, and an orchestrator without the release none.
	if after > settling-1024 {
		t.Errorf("resident file pages %d KB after the release, %d KB before it: want at least 1 MB fewer", after, settling)
	}
	// The release must leave a working server behind.
	resp, err := http.Get(o.url + "/health")
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the release: GET /health = %d, want 200", resp.StatusCode)
	}
}
