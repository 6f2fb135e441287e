package idp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"kici.dev/kici/internal/auth"
)

// fakeForge answers a forge's token endpoint and the user, organisation
// and team calls with the shapes of the forge's API (Gitea /api/v1,
// GitLab /api/v4), and only with the access token it issued.
func fakeForge(t *testing.T, tokenPath string, api map[string]any) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+tokenPath, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("code") != "c1" || r.PostForm.Get("code_verifier") == "" {
			http.Error(w, `{"error":"invalid_grant"}`, 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"at-1","token_type":"bearer"}`))
	})
	for path, body := range api {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer at-1" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			_ = json.NewEncoder(w).Encode(body)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// Gitea/Forgejo and GitLab sign-ins read the login, name and memberships
// from the forge's API; a forge that refuses the membership calls adds no
// groups rather than failing the sign-in.
func TestForgeIdentities(t *testing.T) {
	ctx := context.Background()
	gitea := fakeForge(t, "/login/oauth/access_token", map[string]any{
		"/api/v1/user":       map[string]any{"id": 3, "login": "alice", "full_name": "Alice A", "email": "a@example.com"},
		"/api/v1/user/orgs":  []any{map[string]any{"id": 9, "username": "acme"}},
		"/api/v1/user/teams": []any{map[string]any{"name": "release", "organization": map[string]any{"username": "acme"}}},
	})
	p := New(ProviderConfig{Name: "gitea", Kind: auth.ProviderGitea, URL: gitea.URL, ClientID: "x", ClientSecret: "y"}, "http://kici/cb", nil)
	id, err := p.Finish(ctx, "c1", NewPending("gitea", "/ui/runs"))
	if err != nil {
		t.Fatal(err)
	}
	if id.ID() != "gitea:alice" || id.Display() != "Alice A" || !slices.Equal(id.Groups, []string{"acme", "acme/release"}) {
		t.Errorf("gitea identity: %+v", id)
	}

	gitlab := fakeForge(t, "/oauth/token", map[string]any{
		"/api/v4/user": map[string]any{"id": 5, "username": "bob", "name": "", "email": "b@example.com"},
	})
	p = New(ProviderConfig{Name: "gitlab", Kind: auth.ProviderGitLab, URL: gitlab.URL, ClientID: "x", ClientSecret: "y"}, "http://kici/cb", nil)
	id, err = p.Finish(ctx, "c1", NewPending("gitlab", "/ui/runs"))
	if err != nil {
		t.Fatal(err)
	}
	if id.ID() != "gitlab:bob" || id.Display() != "bob" || len(id.Groups) != 0 {
		t.Errorf("gitlab identity (no groups endpoint): %+v", id)
	}

	if _, err := p.Finish(ctx, "wrong-code", NewPending("gitlab", "/ui/runs")); err == nil {
		t.Error("a refused code exchange signed someone in")
	}
}
