package storetest

import (
	"testing"

	"kici.dev/kici/internal/store"
)

// testWorkflowData covers job outputs and run contexts: round trip,
// replacement, per-run listing and ErrNotFound for unknown rows.
func testWorkflowData(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("wd-run", at(0)), []*store.Job{
		{ID: "wd-a", JobName: "a", BaseJobName: "a"}, {ID: "wd-b", JobName: "b", BaseJobName: "b"}}))
	must(t, s.CreateRun(ctx, fullRun("wd-other", at(0)), []*store.Job{{ID: "wd-o", JobName: "a", BaseJobName: "a"}}))

	got, err := s.ListJobOutputs(ctx, "wd-run")
	must(t, err)
	same(t, "ListJobOutputs empty", map[string]map[string]string{}, got)

	must(t, s.PutJobOutputs(ctx, "wd-a", map[string]string{"version": "1.2.3", "notes": "line 1\nline 2 ✓"}))
	must(t, s.PutJobOutputs(ctx, "wd-a", map[string]string{"version": "1.2.4"}))
	must(t, s.PutJobOutputs(ctx, "wd-o", map[string]string{"x": "y"}))
	got, err = s.ListJobOutputs(ctx, "wd-run")
	must(t, err)
	same(t, "ListJobOutputs", map[string]map[string]string{"wd-a": {"version": "1.2.4"}}, got)
	wantErr(t, "PutJobOutputs unknown job", s.PutJobOutputs(ctx, "missing", map[string]string{"a": "b"}), store.ErrNotFound)

	_, err = s.GetRunContext(ctx, "wd-run")
	wantErr(t, "GetRunContext none", err, store.ErrNotFound)
	rc := &store.RunContext{Inputs: map[string]any{"target": "prod", "count": 3.0, "dry": true}, ChangedPaths: []string{"go.mod", "docs/a b.md"}}
	must(t, s.PutRunContext(ctx, "wd-run", rc))
	back, err := s.GetRunContext(ctx, "wd-run")
	must(t, err)
	same(t, "GetRunContext", rc, back)
	must(t, s.PutRunContext(ctx, "wd-run", &store.RunContext{}))
	back, err = s.GetRunContext(ctx, "wd-run")
	must(t, err)
	same(t, "GetRunContext replaced", &store.RunContext{}, back)
	wantErr(t, "PutRunContext unknown run", s.PutRunContext(ctx, "missing", rc), store.ErrNotFound)
}
