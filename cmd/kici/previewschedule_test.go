package main

import (
	"strings"
	"testing"
)

// TestPreviewScheduleAt: a schedule trigger fires in the minute given by
// --at, in its own time zone, and the next fire time is shown.
func TestPreviewScheduleAt(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{
		"nightly.yaml": "on:\n  schedule: {cron: \"0 3 * * *\", timezone: Europe/Berlin}\njobs:\n  a: {run: x}\n",
		"ci.yaml":      "on: push\njobs:\n  a: {run: x}\n",
	})
	out, stderr, code := runKici(t, bin, repo, "preview", "schedule", "--at", "2026-03-01T02:00:30Z")
	if code != 0 || !strings.Contains(out, `RUN  nightly: trigger 0 "0 3 * * *" (Europe/Berlin); next after that: 2026-03-02T03:00:00+01:00`) {
		t.Fatalf("fires (%d):\n%s\n%s", code, out, stderr)
	}
	out, _, code = runKici(t, bin, repo, "preview", "schedule", "--at", "2026-03-01T03:00:00Z")
	if code != 0 || !strings.Contains(out, "SKIP nightly") {
		t.Fatalf("does not fire (%d):\n%s", code, out)
	}
	if _, stderr, code := runKici(t, bin, repo, "preview", "schedule", "--at", "tomorrow"); code != 1 || !strings.Contains(stderr, "not an RFC 3339 time") {
		t.Fatalf("bad --at: %d %s", code, stderr)
	}
}
