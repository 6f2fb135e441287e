package jobdata

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// jobDataFixture: context release (binding scope release on agents
// labelled deploy, variables REGION and locked TIER), context ci (no
// bindings), secrets release:npm_token and other:token.
func jobDataFixture(t *testing.T) (store.Store, *secrets.Service) {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	key, err := masterkey.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	svc := secrets.New(st, &masterkey.Ring{Current: key})
	for _, c := range []*store.Context{
		{OrgID: "acme", Name: "release", Type: store.ContextTypeFixed, Enabled: true},
		{OrgID: "acme", Name: "ci", Type: store.ContextTypeFixed, Enabled: true},
		{OrgID: "acme", Name: "prod-only", Type: store.ContextTypeFixed, Enabled: true, BranchRestrictions: []string{"prod"}},
	} {
		if _, err := st.UpsertContext(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = st.BindContext(ctx, "acme", "release", "pg:release", "deploy")
	must(err)
	_, err = st.BindContext(ctx, "acme", "prod-only", "other", "**")
	must(err)
	must(st.PutContextVariable(ctx, "acme", "release", &store.ContextVariable{Key: "REGION", Value: "eu"}))
	must(st.PutContextVariable(ctx, "acme", "release", &store.ContextVariable{Key: "TIER", Value: "gold", Locked: true}))
	must(st.PutContextVariable(ctx, "acme", "ci", &store.ContextVariable{Key: "REGION", Value: "us"}))
	must(st.PutContextSourceOverride(ctx, "acme", "release", &store.ContextSourceOverride{RoutingKey: "rk-1", Key: "TIER", Value: "tin"}))
	must(st.PutContextSourceOverride(ctx, "acme", "release", &store.ContextSourceOverride{RoutingKey: "rk-1", Key: "REGION", Value: "ap"}))
	must(st.CreateSource(ctx, &store.Source{ID: "src-1", OrgID: "acme", Name: "s", Provider: provider.Generic, RoutingKey: "rk-1", Enabled: true}))
	must(svc.Put(ctx, "acme", "release", "npm_token", "tok-release", &store.AccessLogEntry{Action: "secret.set"}))
	must(svc.Put(ctx, "acme", "other", "token", "tok-other", &store.AccessLogEntry{Action: "secret.set"}))
	return st, svc
}

func jobWith(t *testing.T, contexts []string, secretsDecl map[string]string) *store.Job {
	t.Helper()
	cfg, err := json.Marshal(lockfile.Job{Name: "deploy", Contexts: contexts, Steps: []lockfile.Step{{Name: "s", Run: "true", Secrets: secretsDecl}}})
	if err != nil {
		t.Fatal(err)
	}
	return &store.Job{ID: "job-1", RunID: "run-1", JobName: "deploy", Config: cfg}
}

func TestJobDataGrantsSecretsOnlyThroughPassingContexts(t *testing.T) {
	st, svc := jobDataFixture(t)
	resolve := NewResolver(st, svc, nil)
	decl := map[string]string{"NPM": "release:npm_token", "OTHER": "other:token"}
	deployAgent := dispatch.AgentFacts{ID: "a1", Labels: []string{"linux", "deploy"}}
	trusted := &store.Run{ID: "run-1", OrgID: "acme", SourceID: "src-1", TargetBranch: "main", TrustTier: store.TrustTrusted}
	fork := &store.Run{ID: "run-1", OrgID: "acme", SourceID: "src-1", TargetBranch: "main", TrustTier: store.TrustUnknown}

	cases := []struct {
		name     string
		run      *store.Run
		contexts []string
		agent    dispatch.AgentFacts
		want     map[string]string
	}{
		{"bound scope on a matching agent", trusted, []string{"release"}, deployAgent, map[string]string{"release:npm_token": "tok-release"}},
		{"no context named: nothing", trusted, nil, deployAgent, nil},
		{"context without bindings", trusted, []string{"ci"}, deployAgent, nil},
		{"host pattern does not match the agent", trusted, []string{"release"}, dispatch.AgentFacts{ID: "a2", Labels: []string{"linux"}}, nil},
		{"context failing its branch gate grants nothing", trusted, []string{"prod-only"}, deployAgent, nil},
		{"fork run gets no secrets", fork, []string{"release"}, deployAgent, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := resolve(context.Background(), c.run, jobWith(t, c.contexts, decl), c.agent)
			if err != nil {
				t.Fatal(err)
			}
			if len(data.Secrets) != len(c.want) {
				t.Fatalf("secrets %v, want %v", data.Secrets, c.want)
			}
			for k, v := range c.want {
				if data.Secrets[k] != v {
					t.Fatalf("secrets %v, want %v", data.Secrets, c.want)
				}
			}
		})
	}

	// A context that explicitly allows untrusted runs hands its secrets to
	// a fork run.
	if err := st.UpdateContextPolicy(context.Background(), "acme", "release", func(c *store.Context) error {
		c.AllowUntrusted = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	data, err := resolve(context.Background(), fork, jobWith(t, []string{"release"}, decl), deployAgent)
	if err != nil || data.Secrets["release:npm_token"] != "tok-release" || len(data.Secrets) != 1 {
		t.Fatalf("allowUntrusted: %v %v", data.Secrets, err)
	}
}

// Variables merge last-wins in bound order; a source override replaces an
// unlocked variable but never a locked one.
func TestJobDataMergesContextVariables(t *testing.T) {
	st, svc := jobDataFixture(t)
	resolve := NewResolver(st, svc, nil)
	run := &store.Run{ID: "run-1", OrgID: "acme", SourceID: "src-1", TargetBranch: "main"}
	data, err := resolve(context.Background(), run, jobWith(t, []string{"ci", "release"}, nil), dispatch.AgentFacts{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if data.ContextVars["REGION"] != "ap" || data.ContextVars["TIER"] != "gold" {
		t.Fatalf("vars %v, want REGION=ap (release's override, last bound) and TIER=gold (locked)", data.ContextVars)
	}
	data, _ = resolve(context.Background(), run, jobWith(t, []string{"release", "ci"}, nil), dispatch.AgentFacts{ID: "a"})
	if data.ContextVars["REGION"] != "us" {
		t.Fatalf("vars %v, want REGION=us (ci bound last)", data.ContextVars)
	}
}

// The attack of a label-scoped static token: minted for [deploy], its
// agent also registers kici:host:deploybox (platform labels are exempt
// from the scope) and is handed a job pinned to that host. The job's
// secrets are withheld; only an agent whose token lists
// kici:host:deploybox (kici-admin agent register --labels
// kici:host:deploybox,deploy) gets them, and an unscoped token does not.
func TestHostPinnedSecretsOnlyForATokenMintedForTheHost(t *testing.T) {
	st, svc := jobDataFixture(t)
	resolve := NewResolver(st, svc, nil)
	run := &store.Run{ID: "run-1", OrgID: "acme", SourceID: "src-1", TargetBranch: "main", TrustTier: store.TrustTrusted}
	job := jobWith(t, []string{"release"}, map[string]string{"NPM": "release:npm_token"})
	job.RunsOnLabels = []string{"deploy", "kici:host:deploybox"}
	reported := []string{"deploy", "kici:os:linux", "kici:host:deploybox"}
	for _, c := range []struct {
		name        string
		tokenLabels []string
		want        string
	}{
		{"token scoped without the host", []string{"deploy"}, ""},
		{"unscoped token", nil, ""},
		{"token minted for another host", []string{"deploy", "kici:host:laptop"}, ""},
		{"token minted for the host", []string{"deploy", "kici:host:deploybox"}, "tok-release"},
	} {
		data, err := resolve(context.Background(), run, job, dispatch.AgentFacts{ID: "a", Labels: reported, TokenLabels: c.tokenLabels})
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Secrets["release:npm_token"]; got != c.want || (c.want == "" && len(data.Secrets) != 0) {
			t.Errorf("%s: secrets %v, want %q", c.name, data.Secrets, c.want)
		}
	}
	// A job that pins no host is unchanged: the scoped token's agent gets
	// the secret its context binds.
	job.RunsOnLabels = []string{"deploy"}
	data, err := resolve(context.Background(), run, job, dispatch.AgentFacts{ID: "a", Labels: reported, TokenLabels: []string{"deploy"}})
	if err != nil || data.Secrets["release:npm_token"] != "tok-release" {
		t.Fatalf("unpinned job: %v %v", data.Secrets, err)
	}
}
