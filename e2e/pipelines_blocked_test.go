package e2e

import (
	"os"
	"testing"
)

// knownBlockedPipelines lists the corpus cases that fail today because of a
// known bug, keyed "<pipeline>" (its runs on the orchestrator) or
// "<pipeline>/local" (its `kici run local` check), with the issue item they
// wait for. TestPipelines reports each as a skip with this reason, never as
// a pass; remove the entry in the change that fixes the bug (run them
// anyway with KICI_PIPELINES_RUN_BLOCKED=1 to see where they stand).
var knownBlockedPipelines = map[string]string{
	"release/local":        "kici run local has no provenance issuer: an artifact with attest: true fails locally (docs/triggers.md)",
	"docs-artifacts/local": "kici run local has no provenance issuer: an artifact with attest: true fails locally (docs/triggers.md)",
}

// skipIfBlocked skips a known-blocked case with its reason.
func skipIfBlocked(t *testing.T, key string) {
	t.Helper()
	if reason, ok := knownBlockedPipelines[key]; ok && os.Getenv("KICI_PIPELINES_RUN_BLOCKED") == "" {
		t.Skipf("KNOWN BLOCKED, not a pass: %s (KICI_PIPELINES_RUN_BLOCKED=1 runs it)", reason)
	}
}
