package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// GET /runs?branch= keeps the runs of one branch: by their refs/heads/ ref
// or their pull request's target branch; refs/heads/<b> and <b> are the
// same filter, and the count mode honours it.
func TestRunsListBranchFilter(t *testing.T) {
	e := newEnv(t)
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	e.addRun("ci", status.RunSuccess, "o/app", base) // refs/heads/main
	for i, ref := range []string{"refs/heads/feature/x", "refs/heads/feature/x", "refs/pull/7/head"} {
		run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", Status: status.RunSuccess, Provider: provider.Local,
			RepoIdentifier: "o/app", RepoURL: "file:///x", Ref: ref, SHA: strings.Repeat("b", 40),
			DeliveryID: "generic:o:s:b", OrgID: "o", CreatedAt: base.Add(time.Duration(i+1) * time.Minute)}
		if strings.HasPrefix(ref, "refs/pull/") {
			run.TriggerType, run.TargetBranch = apitypes.TriggerPullRequest, "main"
		}
		if err := e.st.CreateRun(context.Background(), run, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		query string
		want  float64
	}{
		{"branch=feature/x", 2},
		{"branch=refs/heads/feature/x", 2},
		{"branch=main", 2}, // the push to main and the pull request into main
		{"branch=nope", 0},
		{"branch=feature/x&count=true", 2},
	} {
		code, m := e.get("/api/v1/admin/runs?" + c.query)
		if code != 200 || m["total"] != c.want {
			t.Errorf("%s: %d total=%v, want %v", c.query, code, m["total"], c.want)
		}
	}
}
