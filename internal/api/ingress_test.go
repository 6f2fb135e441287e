package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/netguard"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/ghfake"
)

type ingressEnv struct {
	*env
	fake    *ghfake.Server
	emitted []apitypes.EmitRequest
}

func newIngressEnv(t *testing.T, mode config.Mode) *ingressEnv {
	t.Helper()
	st, a := openTestStore(t, t.TempDir())
	owner := issueToken(t, a, auth.RoleOwner)
	auditor := issueToken(t, a, auth.RoleAuditor)
	ie := &ingressEnv{fake: ghfake.New(77)}
	t.Cleanup(ie.fake.Close)
	// The fake forge listens on 127.0.0.1: these tests opt in to local
	// forge URLs (KICI_ALLOW_LOCAL_SOURCE_URLS=true), as an operator must.
	mux := NewRouter(Deps{Store: st, Auth: a, Mode: mode, SourceURLs: &netguard.Guard{AllowLocal: true}, EmitEvent: func(_ context.Context, r apitypes.EmitRequest) (string, error) {
		ie.emitted = append(ie.emitted, r)
		return fmt.Sprintf("kici_event:%d", len(ie.emitted)), nil
	}})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ie.env = &env{t: t, st: st, srv: srv, owner: owner, auditor: auditor}
	return ie
}

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestGitHubSourceCreation(t *testing.T) {
	e := newIngressEnv(t, config.DefaultMode)
	app := map[string]any{"provider": "github", "orgId": "acme", "name": "gh", "appId": 77, "privateKey": e.fake.PrivateKeyPEM, "apiBaseUrl": e.fake.URL}
	code, m, _ := e.do("POST", apitypes.AdminPrefix+"/sources", e.owner, jsonBody(app))
	if code != 201 || m["routingKey"] != "github:77" || !strings.HasPrefix(m["webhookUrl"].(string), "/webhook/acme/github/") {
		t.Fatalf("create App source: %d %v", code, m)
	}
	id := m["id"].(string)
	set, err := e.st.GetSourceSettings(context.Background(), id)
	if err != nil || set.GitHub == nil || set.GitHub.AppID != 77 || set.GitHub.APIBaseURL != e.fake.URL {
		t.Fatalf("settings = %+v (%v)", set, err)
	}
	if e.fake.Calls("GET /app") != 1 {
		t.Fatal("App credentials were not validated with GET /app")
	}
	code, m, _ = e.do("GET", apitypes.AdminPrefix+"/generic-sources/"+id+"/webhook-secrets", e.owner, "")
	if code != 200 || len(m["secrets"].([]any)) != 1 {
		t.Fatalf("secrets: %d %v", code, m)
	}

	cases := []struct {
		body   map[string]any
		token  string
		status int
		want   string
	}{
		{map[string]any{"provider": "github", "orgId": "acme", "name": "gh", "token": "ghp_x"}, e.owner, 409, "already exists"},
		{map[string]any{"provider": "github", "orgId": "acme", "name": "t", "token": "ghp_x"}, e.owner, 201, ""},
		{map[string]any{"provider": "github", "orgId": "acme", "name": "w", "appId": 78, "privateKey": e.fake.PrivateKeyPEM, "apiBaseUrl": e.fake.URL}, e.owner, 400, "could not be validated"},
		{map[string]any{"provider": "github", "orgId": "acme", "name": "k", "appId": 77, "privateKey": "not a key"}, e.owner, 400, "private key"},
		{map[string]any{"provider": "github", "orgId": "acme", "name": "n"}, e.owner, 400, "appId and privateKey are required"},
		{map[string]any{"provider": "gitlab", "orgId": "acme", "name": "n", "token": "x"}, e.owner, 400, "not supported"},
		{map[string]any{"provider": "github", "orgId": "acme", "name": "u", "token": "x", "apiBaseUrl": "file:///etc"}, e.owner, 400, "apiBaseUrl"},
		{map[string]any{"provider": "github", "orgId": "acme", "name": "a", "token": "x"}, e.auditor, 403, ""},
	}
	for i, c := range cases {
		code, m, _ := e.do("POST", apitypes.AdminPrefix+"/sources", c.token, jsonBody(c.body))
		if code != c.status || (c.want != "" && !strings.Contains(fmt.Sprint(m["error"]), c.want)) {
			t.Errorf("case %d: %d %v, want %d %q", i, code, m, c.status, c.want)
		}
		if code == 201 && !strings.HasPrefix(m["routingKey"].(string), "github:token:") {
			t.Errorf("token source routing key %v", m["routingKey"])
		}
	}
}

func TestObservedModeRefusesGitHubAppSources(t *testing.T) {
	e := newIngressEnv(t, ModeObserved)
	app := map[string]any{"provider": "github", "orgId": "acme", "name": "gh", "appId": 77, "privateKey": e.fake.PrivateKeyPEM, "apiBaseUrl": e.fake.URL}
	code, m, _ := e.do("POST", apitypes.AdminPrefix+"/sources", e.owner, jsonBody(app))
	if code != 400 || m["error"] != ObservedRefusal {
		t.Fatalf("observed App source: %d %v", code, m)
	}
	if srcs, _ := e.st.ListSources(context.Background(), ""); len(srcs) != 0 {
		t.Fatalf("a refused source was stored: %v", srcs)
	}
	tok := map[string]any{"provider": "github", "orgId": "acme", "name": "tok", "token": "ghp_x"}
	if code, m, _ := e.do("POST", apitypes.AdminPrefix+"/sources", e.owner, jsonBody(tok)); code != 201 {
		t.Fatalf("observed token source: %d %v", code, m)
	}
}

func TestSecretRotationRoutes(t *testing.T) {
	e := newIngressEnv(t, "")
	code, m, _ := e.do("POST", apitypes.AdminPrefix+"/generic-sources", e.owner, `{"orgId":"acme","name":"hooks"}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, m)
	}
	id := m["source"].(map[string]any)["id"].(string)
	code, m, _ = e.do("POST", apitypes.AdminPrefix+"/generic-sources/"+id+"/webhook-secrets", e.owner, "")
	if code != 201 || len(m["webhookSecret"].(string)) != 64 {
		t.Fatalf("rotate: %d %v", code, m)
	}
	secs, _ := e.st.ListSourceSecrets(context.Background(), id, true)
	if len(secs) != 2 {
		t.Fatalf("active secrets after rotation = %d, want 2 (old and new)", len(secs))
	}
	if code, _, _ := e.do("DELETE", apitypes.AdminPrefix+"/generic-sources/"+id+"/webhook-secrets/"+secs[0].ID, e.auditor, ""); code != 403 {
		t.Fatalf("auditor revoke: %d, want 403", code)
	}
	if code, m, _ := e.do("DELETE", apitypes.AdminPrefix+"/generic-sources/"+id+"/webhook-secrets/"+secs[0].ID, e.owner, ""); code != 200 {
		t.Fatalf("revoke: %d %v", code, m)
	}
	if code, _, _ := e.do("DELETE", apitypes.AdminPrefix+"/generic-sources/"+id+"/webhook-secrets/"+secs[0].ID, e.owner, ""); code != 404 {
		t.Fatalf("second revoke: %d, want 404", code)
	}
	act, _ := e.st.ListSourceSecrets(context.Background(), id, true)
	if len(act) != 1 || act[0].ID != secs[1].ID {
		t.Fatalf("active after revoke = %+v", act)
	}
	code, m, _ = e.do("POST", apitypes.AdminPrefix+"/generic-sources", e.owner, `{"orgId":"acme","name":"open","verificationMethod":"ip_allowlist","verificationConfig":{"ipAllowlist":["127.0.0.1","nope"]}}`)
	if code != 400 || !strings.Contains(m["error"].(string), "not an IP address") {
		t.Fatalf("bad allowlist: %d %v", code, m)
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	// A gzip.Writer over a bytes.Buffer cannot fail.
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func TestEventLogRoutes(t *testing.T) {
	e := newIngressEnv(t, "")
	ctx := context.Background()
	body := []byte(`{"ref":"refs/heads/main"}`)
	for i, st := range []store.EventLogStatus{store.EventLogProcessed, store.EventLogLockfileMissing, ""} {
		id := fmt.Sprintf("github:77:d%d", i)
		if err := e.st.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: "s", OrgID: "acme", Event: "push", Payload: body},
			&store.EventLogEntry{OrgID: "acme", RoutingKey: "github:77", Event: "push", Source: "direct", Provider: provider.GitHub, PayloadGz: gz(body)}); err != nil {
			t.Fatal(err)
		}
		if st != "" {
			if err := e.st.FinishDeliveryOutcome(ctx, id, store.DeliveryProcessed, "", json.RawMessage(`{"summary":"1 of 1 workflows matched","workflows":[{"name":"ci","matched":true}]}`),
				store.EventOutcome{Status: st, MatchedCount: 1, RunIDs: []string{"run-1"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, m, _ := e.do("GET", apitypes.AdminPrefix+"/event-log?status=lockfile_missing", e.auditor, "")
	if code != 200 || m["total"].(float64) != 1 || m["deliveries"].([]any)[0].(map[string]any)["deliveryId"] != "github:77:d1" {
		t.Fatalf("filtered list: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", apitypes.AdminPrefix+"/event-log?status=bogus", e.owner, ""); code != 400 {
		t.Fatalf("bad status: %d", code)
	}
	code, m, _ = e.do("GET", apitypes.AdminPrefix+"/event-log/github:77:d0", e.auditor, "")
	d := m["delivery"].(map[string]any)
	if code != 200 || d["status"] != "processed" || d["runId"] != "run-1" || m["trace"] == nil || m["payload"] != nil {
		t.Fatalf("show as auditor: %d %v", code, m)
	}
	if code, m, _ := e.do("GET", apitypes.AdminPrefix+"/event-log/github:77:d0?includePayload=true", e.auditor, ""); code != 403 {
		t.Fatalf("payload as auditor: %d %v, want 403", code, m)
	}
	code, m, _ = e.do("GET", apitypes.AdminPrefix+"/event-log/github:77:d0?includePayload=true", e.owner, "")
	if code != 200 || m["payload"].(map[string]any)["ref"] != "refs/heads/main" {
		t.Fatalf("payload as owner: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", apitypes.AdminPrefix+"/event-log/nope", e.owner, ""); code != 404 {
		t.Fatalf("unknown delivery: %d", code)
	}
}

func TestEmitAndRegistrationRoutes(t *testing.T) {
	e := newIngressEnv(t, "")
	code, m, _ := e.do("POST", apitypes.AdminPrefix+"/events/emit", e.owner, `{"eventName":"deploy","payload":{"env":"prod"},"sourceRepo":"acme/api"}`)
	if code != 201 || m["eventId"] != "kici_event:1" || len(e.emitted) != 1 || e.emitted[0].EventName != "deploy" || string(e.emitted[0].Payload) != `{"env":"prod"}` {
		t.Fatalf("emit: %d %v %+v", code, m, e.emitted)
	}
	for _, b := range []string{`{"eventName":"","payload":{}}`, `{"eventName":"x","payload":[1]}`, `{"eventName":"x"}`} {
		if code, _, _ := e.do("POST", apitypes.AdminPrefix+"/events/emit", e.owner, b); code != 400 {
			t.Fatalf("emit %s: %d, want 400", b, code)
		}
	}
	if code, _, _ := e.do("POST", apitypes.AdminPrefix+"/events/emit", e.auditor, `{"eventName":"x","payload":{}}`); code != 403 {
		t.Fatalf("auditor emit: %d, want 403", code)
	}
	regs := []*store.Registration{{OrgID: "acme", RoutingKey: "github:77", WorkflowName: "nightly", TriggerTypes: []string{"schedule"}, Workflow: json.RawMessage(`{"name":"nightly"}`)},
		{OrgID: "acme", RoutingKey: "github:77", WorkflowName: "ci", TriggerTypes: []string{"push"}, Workflow: json.RawMessage(`{"name":"ci"}`)}}
	if err := e.st.ReplaceRegistrations(context.Background(), "s", "acme/api", regs); err != nil {
		t.Fatal(err)
	}
	code, m, _ = e.do("GET", apitypes.AdminPrefix+"/registrations?triggerType=schedule&org=acme", e.auditor, "")
	list := m["registrations"].([]any)
	if code != 200 || len(list) != 1 || list[0].(map[string]any)["workflowName"] != "nightly" {
		t.Fatalf("registrations: %d %v", code, m)
	}
	id := list[0].(map[string]any)["id"].(string)
	if code, m, _ := e.do("GET", apitypes.AdminPrefix+"/registrations/"+id, e.auditor, ""); code != 200 || m["registration"].(map[string]any)["repoIdentifier"] != "acme/api" {
		t.Fatalf("registration: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", apitypes.AdminPrefix+"/registrations/x", e.owner, ""); code != 404 {
		t.Fatalf("unknown registration: %d", code)
	}
}

func TestUniversalGitSourceValidation(t *testing.T) {
	e := newIngressEnv(t, "")
	cases := map[string]string{
		`{"orgId":"acme","name":"g1","gitConfig":{"preset":"gitea","gitUrlTemplate":"https://git.example/{repo}.git"}}`:                                         "",
		`{"orgId":"acme","name":"g2","gitConfig":{"preset":"nope","gitUrlTemplate":"https://git.example/{repo}.git"}}`:                                          "unknown preset",
		`{"orgId":"acme","name":"g3","gitConfig":{"preset":"gitea","gitUrlTemplate":"https://git.example/fixed.git"}}`:                                          "must contain {repo}",
		`{"orgId":"acme","name":"g4","gitConfig":{"preset":"gitea","gitUrlTemplate":"https://u:p@git.example/{repo}.git"}}`:                                     "without credentials",
		`{"orgId":"acme","name":"g5","gitConfig":{"preset":"gitea","gitUrlTemplate":"ext::sh {repo}"}}`:                                                         "https, http or file URL",
		`{"orgId":"acme","name":"g6","gitConfig":{"preset":"gitea","gitUrlTemplate":"https://git.example/{repo}.git","credentialType":"pat"}}`:                  "credential is required",
		`{"orgId":"acme","name":"g7","gitConfig":{"preset":"gitea","gitUrlTemplate":"https://git.example/{repo}.git","credentialType":"ssh","credential":"k"}}`: "not supported",
	}
	for body, want := range cases {
		code, m, _ := e.do("POST", apitypes.AdminPrefix+"/generic-sources", e.owner, body)
		if want == "" {
			if code != 201 {
				t.Fatalf("%s: %d %v", body, code, m)
			}
			id := m["source"].(map[string]any)["id"].(string)
			set, err := e.st.GetSourceSettings(context.Background(), id)
			if err != nil || set.Git == nil || set.Git.Preset != "gitea" {
				t.Fatalf("stored git config = %+v (%v)", set, err)
			}
			continue
		}
		if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("%s: %d %v, want 400 %q", body, code, m, want)
		}
	}
}
