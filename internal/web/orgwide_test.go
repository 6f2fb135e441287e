package web

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// TestOrgWideRunShowsWhereItWasDefined: the runs list and the run page say
// that a run came from an organization-wide workflow and where it was
// defined, beside the repository's own runs.
func TestOrgWideRunShowsWhereItWasDefined(t *testing.T) {
	h := newHarness(t)
	r := &store.Run{ID: "55555555-5555-5555-5555-555555555555", WorkflowName: "org-lint", Status: status.RunSuccess, Provider: provider.Local,
		RepoIdentifier: "demo/app", OrgID: "demo", CreatedAt: time.Now().UTC(),
		WorkflowOrigin: "demo/policies@0123456789ab:.kici/workflows/lint.yaml"}
	if err := h.st.CreateRun(context.Background(), r, nil); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get("/ui/runs")
	mustContain(t, "runs list", body, `from demo/policies@0123456789ab:.kici/workflows/lint.yaml`)
	mustContain(t, "runs list relative time", body, ">now</time>", `title="`+fmtTime(r.CreatedAt)+`"`)
	_, body, _ = c.get("/ui/runs/" + r.ID)
	mustContain(t, "run page", body, `id="workflow-origin"`, "Organization-wide workflow defined in <code>demo/policies@0123456789ab:.kici/workflows/lint.yaml</code>")
	_, body, _ = c.get(h.runURL())
	mustNotContain(t, "the repository's own run", body, "workflow-origin")
}
