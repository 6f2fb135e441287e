package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// The Sources page names the forge of a universal-git source (Gitea,
// GitLab), not the "generic" provider type it is stored under.
func TestSourcesPageNamesForges(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		provider provider.Name
		preset   string
	}{
		{"gt", provider.Generic, "gitea"}, {"gl", provider.Generic, "gitlab-repo"}, {"hooks", provider.Generic, ""},
	} {
		src := &store.Source{ID: "src-" + c.name, OrgID: "acme", Name: c.name, Provider: c.provider, RoutingKey: "generic:acme:src-" + c.name,
			VerificationMethod: "hmac_sha256", WebhookSecret: strings.Repeat("s", 32), Enabled: true, CreatedAt: time.Now().UTC()}
		set := &store.SourceSettings{SourceID: src.ID}
		if c.preset != "" {
			set.Git = &store.GitConfig{Preset: c.preset, GitURLTemplate: "https://git.example.com/{repo}.git"}
		}
		if err := h.st.CreateSourceWithSettings(ctx, src, set, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	code, body, _ := c.get("/ui/sources")
	if code != 200 {
		t.Fatalf("sources page: %d", code)
	}
	want := map[string]string{"src-gt": "Gitea", "src-gl": "GitLab", "src-hooks": "generic webhook"}
	for id, forge := range want {
		i := strings.Index(body, `data-source-id="`+id+`"`)
		if i < 0 {
			t.Fatalf("source %s not listed:\n%s", id, body)
		}
		section := body[i:]
		if j := strings.Index(section, "</section>"); j > 0 {
			section = section[:j]
		}
		if !strings.Contains(section, "<dt>Provider</dt><dd>"+forge+"</dd>") {
			t.Errorf("source %s: provider is not %q:\n%s", id, forge, section)
		}
	}
}

// The Sources page says when the operator denied the org's
// organization-wide workflows for a source.
func TestSourcesPageShowsOrgWideDenial(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.st.PutSourceSettings(ctx, &store.SourceSettings{SourceID: "src-1", OrgWideWorkflows: store.OrgWideDeny}); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	_, body, _ := c.get("/ui/sources")
	mustContain(t, "sources", body, "<dt>Org-wide workflows</dt><dd>denied by the operator</dd>")
}
