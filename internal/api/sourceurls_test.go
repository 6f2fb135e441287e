package api

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/testutil/ghfake"
)

// The attack: an admin points a source's apiBaseUrl at the cloud metadata
// service, at the orchestrator's own loopback port or at another local
// service, so the orchestrator sends the source's token there. On the
// default (no KICI_ALLOW_LOCAL_SOURCE_URLS) each is refused with a 400
// naming the setting, nothing is stored and no request reaches the
// address; a private-network forge stays allowed.
func TestSourceURLsReachingThisHostAreRefused(t *testing.T) {
	st, a := openTestStore(t, t.TempDir())
	owner := issueToken(t, a, auth.RoleOwner)
	fake := ghfake.New(77) // listens on 127.0.0.1
	t.Cleanup(fake.Close)
	srv := httptest.NewServer(NewRouter(Deps{Store: st, Auth: a}))
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, owner: owner}

	for name, body := range map[string]map[string]any{
		"metadata service": {"provider": "github", "orgId": "acme", "name": "m", "token": "ghp_x", "apiBaseUrl": "http://169.254.169.254/latest/"},
		"loopback fake":    {"provider": "github", "orgId": "acme", "name": "l", "appId": 77, "privateKey": fake.PrivateKeyPEM, "apiBaseUrl": fake.URL},
		"localhost name":   {"provider": "github", "orgId": "acme", "name": "n", "token": "ghp_x", "apiBaseUrl": "http://localhost:8080/api/v3"},
		"orchestrator":     {"provider": "github", "orgId": "acme", "name": "o", "token": "ghp_x", "apiBaseUrl": srv.URL},
		"ipv6 link-local":  {"provider": "github", "orgId": "acme", "name": "v", "token": "ghp_x", "apiBaseUrl": "http://[fe80::1]/"},
	} {
		code, m, _ := e.do("POST", apitypes.AdminPrefix+"/sources", owner, jsonBody(body))
		if code != 400 || !strings.Contains(m["error"].(string), "KICI_ALLOW_LOCAL_SOURCE_URLS=true") {
			t.Errorf("%s: %d %v, want 400 naming the setting", name, code, m)
		}
	}
	for name, body := range map[string]string{
		"git api root":  `{"orgId":"acme","name":"g1","gitConfig":{"preset":"gitea","gitUrlTemplate":"https://git.example/{repo}.git","apiBaseUrl":"http://169.254.169.254"}}`,
		"git clone url": `{"orgId":"acme","name":"g2","gitConfig":{"preset":"gitea","gitUrlTemplate":"http://127.0.0.1:3000/{repo}.git"}}`,
	} {
		code, m, _ := e.do("POST", apitypes.AdminPrefix+"/generic-sources", owner, body)
		if code != 400 || !strings.Contains(m["error"].(string), "KICI_ALLOW_LOCAL_SOURCE_URLS") {
			t.Errorf("%s: %d %v, want 400", name, code, m)
		}
	}
	if fake.Calls("GET /app") != 0 {
		t.Fatal("the refused App source was validated against the local address")
	}
	srcs, err := st.ListSources(context.Background(), "acme")
	if err != nil || len(srcs) != 0 {
		t.Fatalf("sources stored: %d (%v)", len(srcs), err)
	}
	// A forge on a private network is a normal self-hosted forge.
	code, m, _ := e.do("POST", apitypes.AdminPrefix+"/sources", owner,
		jsonBody(map[string]any{"provider": "github", "orgId": "acme", "name": "ghe", "token": "ghp_x", "apiBaseUrl": "https://10.1.2.3/api/v3"}))
	if code != 201 {
		t.Fatalf("private-network forge: %d %v", code, m)
	}
}
