package forgestatus

import (
	"testing"

	"kici.dev/kici/internal/store"
)

// TestOrgWideCheckNames: an organization-wide run's checks and statuses
// name the defining repository, so they sit beside (never replace) the
// repository's own workflow of the same name.
func TestOrgWideCheckNames(t *testing.T) {
	job := &store.Job{JobName: "lint"}
	own := &store.Run{WorkflowName: "lint"}
	org := &store.Run{WorkflowName: "lint", WorkflowOrigin: "acme/ci-library@0123456789ab:.kici/workflows/lint.yaml"}
	if got := checkName(own, job); got != "lint / lint" {
		t.Errorf("own check = %q", got)
	}
	if got := checkName(org, job); got != "lint (from acme/ci-library) / lint" {
		t.Errorf("org-wide check = %q", got)
	}
	if got := statusContext(own, job); got != "kici/lint/lint" {
		t.Errorf("own context = %q", got)
	}
	if got := statusContext(org, job); got != "kici/lint@acme/ci-library/lint" {
		t.Errorf("org-wide context = %q", got)
	}
}
