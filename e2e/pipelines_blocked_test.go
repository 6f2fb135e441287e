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
	"python-venv":          "issue 29 item 1: a cache of a directory a step creates (.venv) is never saved or restored",
	"release/local":        "issue 29 item 5: kici run local fails every job with download: (no artifact routes)",
	"ported-service":       "issue 29 items 1 and 4: the cache of .deps (created by a step) is never saved or restored, and its key template is logged unrendered; a step condition on a typed input (inputs.repeat > 2) fails every push with condition_error (no default applied)",
	"ported-service/local": "issue 29 items 4 and 5: the same condition_error, and kici run local fails the download: of the test matrix",
	"docs-artifacts/local": "issue 29 item 5: kici run local fails every job with download: (no artifact routes)",
}

// skipIfBlocked skips a known-blocked case with its reason.
func skipIfBlocked(t *testing.T, key string) {
	t.Helper()
	if reason, ok := knownBlockedPipelines[key]; ok && os.Getenv("KICI_PIPELINES_RUN_BLOCKED") == "" {
		t.Skipf("KNOWN BLOCKED, not a pass: %s (KICI_PIPELINES_RUN_BLOCKED=1 runs it)", reason)
	}
}
