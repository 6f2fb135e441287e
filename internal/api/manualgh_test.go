package api

import (
	"context"
	"strings"
	"testing"

	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/ghfake"
)

type nopEnqueuer struct{}

func (nopEnqueuer) EnqueueJob(context.Context, *store.Job) error { return nil }

// POST /api/v1/admin/runs on a GitHub App source names a branch: the run
// is created at the branch's head commit (resolved through the GitHub API,
// with the App installation looked up for the repository) with the typed
// inputs; an unknown branch is a 404 naming the ref.
func TestManualRunRouteGitHubBranch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fake := ghfake.New(41)
	t.Cleanup(fake.Close)
	const repo, sha = "acme/web", "3333333333333333333333333333333333333333"
	fake.SetInstallation(repo, 5)
	fake.SetBranch(repo, "release/2.x", sha)
	fake.SetFile(repo, sha, lockfetch.LockPath, []byte(`{"schemaVersion":29,"source":{"file":".kici/workflows/d.yaml","export":"#default"},"contentHash":"x","workflows":[`+
		`{"name":"deploy","source":{"file":".kici/workflows/d.yaml","export":"#default"},"contentHash":"x","compileSchemaVersion":5,`+
		`"triggers":[{"_type":"dispatch","inputs":{"count":{"type":"number"}}}],"jobs":[{"_type":"static","name":"ship",`+
		`"runsOn":[{"kind":"exact","value":"nowhere"}],"needs":[],"steps":[{"name":"s","run":"true"}]}]}]}`))
	src := &store.Source{ID: "src-app", OrgID: "acme", Name: "app", Provider: provider.GitHub, RoutingKey: "github:41", VerificationMethod: "hmac_sha256", Enabled: true}
	if err := e.st.CreateSourceWithSettings(ctx, src, &store.SourceSettings{RateLimitRPM: -1,
		GitHub: &store.GitHubConfig{APIBaseURL: fake.URL, AppID: 41, PrivateKeyPEM: fake.PrivateKeyPEM}},
		[]*store.SourceSecret{{Secret: "s"}}); err != nil {
		t.Fatal(err)
	}
	proc := ingest.NewProcessor(e.st, runs.NewTracker(e.st, nopEnqueuer{}, nil, runs.TrackerDeps{}), nil, ingest.ProcessorDeps{})
	e.srv.Config.Handler = NewRouter(Deps{Store: e.st, Auth: authOf(t, e), ManualRuns: proc})

	code, m, _ := e.do("POST", "/api/v1/admin/runs", e.owner,
		`{"sourceId":"src-app","workflow":"deploy","ref":"release/2.x","repo":"acme/web","inputs":{"count":"3"}}`)
	run, _ := m["run"].(map[string]any)
	if code != 201 || run["sha"] != sha || run["ref"] != "refs/heads/release/2.x" {
		t.Fatalf("manual run: %d %v", code, m)
	}
	rc, err := e.st.GetRunContext(ctx, run["runId"].(string))
	if err != nil || rc.Inputs["count"] != 3.0 {
		t.Fatalf("run inputs %v (%v), want count=3 as a number", rc, err)
	}

	code, m, _ = e.do("POST", "/api/v1/admin/runs", e.owner,
		`{"sourceId":"src-app","workflow":"deploy","ref":"release/3.x","repo":"acme/web","inputs":{"count":"3"}}`)
	if msg, _ := m["error"].(string); code != 404 || !strings.Contains(msg, `"release/3.x"`) || !strings.Contains(msg, "acme/web") {
		t.Fatalf("unknown branch: %d %v, want 404 naming the ref", code, m)
	}
}
