package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

type kickRecorder struct {
	mu  sync.Mutex
	ids []string
}

func (k *kickRecorder) KickToken(id string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ids = append(k.ids, id)
	return 1
}

// secEnv is env plus the secret service and an agent kicker.
type secEnv struct {
	*env
	svc  *secrets.Service
	kick *kickRecorder
	dir  string
}

func keyHex(b byte) string { return hex.EncodeToString(bytes.Repeat([]byte{b}, masterkey.Size)) }

// testRing is a master-key ring whose current key is keyHex(1).
func testRing(t *testing.T) *masterkey.Ring {
	t.Helper()
	ring, err := masterkey.LoadRing("", func(k string) string { return map[string]string{"KICI_SECRET_KEY": keyHex(1)}[k] })
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func newSecEnv(t *testing.T) *secEnv {
	t.Helper()
	dir := t.TempDir()
	st, a := openTestStore(t, dir)
	owner := issueToken(t, a, auth.RoleOwner)
	auditor := issueToken(t, a, auth.RoleAuditor)
	ring := testRing(t)
	svc := secrets.New(st, ring)
	kick := &kickRecorder{}
	logs := logstore.NewFS(filepath.Join(dir, "logs"))
	srv := httptest.NewServer(NewRouter(Deps{Store: st, Auth: a, Logs: logs, Version: "test", Secrets: svc, Agents: kick,
		ScalerStatus: func() scaler.Status { return scaler.Status{Scalers: []scaler.ScalerStatus{}} }}))
	t.Cleanup(srv.Close)
	return &secEnv{env: &env{t: t, st: st, logs: logs, srv: srv, owner: owner, auditor: auditor}, svc: svc, kick: kick, dir: dir}
}

// createToken creates an admin token over the API and returns (id, plaintext).
func (e *secEnv) createToken(role auth.Role, routingKey string) (string, string) {
	e.t.Helper()
	body := fmt.Sprintf(`{"label":"t-%s","role":%q}`, role, role)
	if routingKey != "" {
		body = fmt.Sprintf(`{"label":"t-%s","role":%q,"routingKey":%q}`, role, role, routingKey)
	}
	code, m, _ := e.do("POST", "/api/v1/admin/tokens", e.owner, body)
	if code != 201 {
		e.t.Fatalf("create token: %d %v", code, m)
	}
	return m["id"].(string), m["token"].(string)
}

// auditorHiddenReads are the only GET routes an auditor may not call: two
// return webhook secret values and two list credentials (admin and agent
// tokens). docs/security.md documents the same list.
var auditorHiddenReads = map[string]auth.Permission{
	"GET " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secret":  auth.PermSourceSecretRead,
	"GET " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secrets": auth.PermSourceSecretRead,
	"GET " + apitypes.AdminPrefix + "/tokens":                               auth.PermTokenManage,
	"GET " + apitypes.AdminPrefix + "/web-sessions":                         auth.PermTokenManage,
	"GET " + apitypes.AgentTokenPath:                                        auth.PermAgentTokenManage,
}

// An auditor token gets 403 on every write route and 200 on every read,
// against a router over a real SQLite store with every optional service
// wired, except the documented credential reads.
func TestAuditorIsReadOnlyOnEveryRoute(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, a := openTestStore(t, dir)
	auditor := issueToken(t, a, auth.RoleAuditor)
	ring := testRing(t)
	svc := secrets.New(st, ring)
	if err := st.CreateSecretScope(ctx, "acme", "release", nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewRouter(Deps{Store: st, Auth: a, Logs: logstore.NewFS(filepath.Join(dir, "logs")), Secrets: svc,
		ClusterSettings: cluster.NewReader(st, nil, 0, nil), RunControl: &stubRunControl{}, Rerun: stubRerunner{},
		Approvals: approval.NewDecider(st, nil), ScalerStatus: func() scaler.Status { return scaler.Status{Scalers: []scaler.ScalerStatus{}} }}))
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, auditor: auditor}

	writes, reads := 0, 0
	for _, r := range Routes {
		parts := strings.Fields(r)
		method, path, perm := parts[0], parts[1], parts[2]
		if perm == "-" {
			continue
		}
		route := method + " " + path
		concrete := strings.NewReplacer("{id}", "x", "{runId}", "x", "{jobId}", "x", "{i}", "0", "{deliveryId}", "x",
			"{secretId}", "x", "{kid}", "x", "{orgId}", "acme", "{scope}", "release", "{key}", "K", "{name}", "release").Replace(path)
		body := ""
		if method != "GET" && method != "DELETE" {
			body = "{}"
		}
		if method == "GET" {
			// Every org-wide list needs its org (and the key list its scope).
			concrete += "?orgId=acme&customerId=acme&scope=release"
		}
		code, m, _ := e.do(method, concrete, auditor, body)
		if method != "GET" {
			writes++
			if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(m["error"]), `Role "auditor" does not have permission "`+perm+`"`) {
				t.Errorf("%s as auditor: %d %v, want 403 naming %s", r, code, m, perm)
			}
			continue
		}
		if want, hidden := auditorHiddenReads[route]; hidden {
			if perm != string(want) || code != http.StatusForbidden {
				t.Errorf("%s as auditor: %d %v, want 403 (documented credential read, %s)", r, code, m, want)
			}
			continue
		}
		reads++
		switch {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			t.Errorf("%s as auditor: %d %v, want access", r, code, m)
		case !strings.Contains(path, "{") && code != http.StatusOK:
			t.Errorf("%s as auditor: %d %v, want 200", r, code, m)
		}
	}
	if writes < 30 || reads < 25 {
		t.Fatalf("only %d write and %d read routes checked", writes, reads)
	}
	// The matrix agrees: the auditor holds every GET permission but the
	// hidden ones, and no permission of a write route.
	for _, r := range Routes {
		parts := strings.Fields(r)
		if parts[2] == "-" {
			continue
		}
		_, hidden := auditorHiddenReads[parts[0]+" "+parts[1]]
		if holds := auth.HasPermission(auth.RoleAuditor, auth.Permission(parts[2])); holds != (parts[0] == "GET" && !hidden) {
			t.Errorf("%s: auditor holds %s = %t", r, parts[2], holds)
		}
	}
}

func TestTokenLifecycleAndRevocation(t *testing.T) {
	e := newSecEnv(t)
	// No header / garbage: the admin middleware's error bodies.
	if code, m, _ := e.do("GET", "/api/v1/admin/runs", "", ""); code != 401 || m["error"] != "Missing authorization" {
		t.Fatalf("no header: %d %v", code, m)
	}
	// Only the owner manages tokens.
	if code, m, _ := e.do("POST", "/api/v1/admin/tokens", e.auditor, `{"label":"x","role":"owner"}`); code != 403 {
		t.Fatalf("auditor minting a token: %d %v", code, m)
	}
	for _, bad := range []string{`{"label":"","role":"admin"}`, `{"label":"x","role":"root"}`,
		`{"label":"x","role":"admin","expiresAt":"2000-01-01T00:00:00Z"}`, `{"label":"x","role":"admin","routingKey":""}`,
		`{"label":"x","role":"admin","extra":1}`} {
		if code, m, _ := e.do("POST", "/api/v1/admin/tokens", e.owner, bad); code != 400 {
			t.Errorf("%s: %d %v, want 400", bad, code, m)
		}
	}
	id, tok := e.createToken(auth.RoleAdmin, "")
	if !strings.HasPrefix(tok, auth.AdminTokenPrefix) {
		t.Fatalf("token %q", tok)
	}
	if code, m, _ := e.do("GET", "/api/v1/admin/runs", tok, ""); code != 200 {
		t.Fatalf("new token: %d %v", code, m)
	}
	code, m, _ := e.do("GET", "/api/v1/admin/tokens", e.owner, "")
	if code != 200 || !strings.Contains(fmt.Sprint(m["tokens"]), id) || strings.Contains(fmt.Sprint(m), tok) || strings.Contains(fmt.Sprint(m), auth.Hash(tok)) {
		t.Fatalf("list: %d %v", code, m)
	}
	if code, m, _ := e.do("DELETE", "/api/v1/admin/tokens/"+id, e.owner, ""); code != 200 || m["revoked"] != true {
		t.Fatalf("revoke: %d %v", code, m)
	}
	if code, m, _ := e.do("GET", "/api/v1/admin/runs", tok, ""); code != 401 || m["error"] != "Invalid or expired token" {
		t.Fatalf("revoked token: %d %v", code, m)
	}
	// Revoking again is fine; a mistyped id is a 404, never a false "revoked".
	if code, m, _ := e.do("DELETE", "/api/v1/admin/tokens/"+id, e.owner, ""); code != 200 || m["revoked"] != true {
		t.Fatalf("second revoke: %d %v", code, m)
	}
	if code, m, _ := e.do("DELETE", "/api/v1/admin/tokens/no-such-token", e.owner, ""); code != 404 || m["error"] != "Token not found" {
		t.Fatalf("revoke of an unknown id: %d %v", code, m)
	}
	// An expired token is refused the same way.
	past := time.Now().Add(-time.Minute)
	plain := auth.NewAdminTokenPlaintext()
	if err := e.st.CreateAdminTokenAudited(context.Background(), &store.AdminToken{ID: uuid.NewString(), Label: "old", Role: "owner",
		TokenHash: auth.Hash(plain), ExpiresAt: &past}, "", nil); err != nil {
		t.Fatal(err)
	}
	if code, m, _ := e.do("GET", "/api/v1/admin/runs", plain, ""); code != 401 || m["error"] != "Invalid or expired token" {
		t.Fatalf("expired token: %d %v", code, m)
	}
	// Both writes are in the access log, with who did them.
	_, m, _ = e.do("GET", "/api/v1/admin/access-log?limit=10", e.auditor, "")
	log := fmt.Sprint(m["entries"])
	for _, want := range []string{"token.create", "token.revoke", "admin_token:" + id, "tokenLabel:owner"} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %q: %s", want, log)
		}
	}
}

// A token scoped to one routing key sees only that key's runs and sources
// and is refused every org-wide family.
func TestRoutingKeyScopedToken(t *testing.T) {
	e := newSecEnv(t)
	ctx := context.Background()
	mk := func(name string) (*store.Source, *store.Run) {
		src := &store.Source{ID: uuid.NewString(), OrgID: "o", Name: name, Provider: provider.Generic, VerificationMethod: "none", Enabled: true}
		src.RoutingKey = "generic:o:" + src.ID
		if err := e.st.CreateSource(ctx, src); err != nil {
			t.Fatal(err)
		}
		run, _ := e.addRun("wf-"+name, status.RunSuccess, "r", time.Now(), "build")
		run.SourceID = src.ID
		// addRun does not set SourceID: write a second run that does.
		run2 := &store.Run{ID: uuid.NewString(), WorkflowName: "wf-" + name, Status: status.RunSuccess, OrgID: "o", SourceID: src.ID, CreatedAt: time.Now()}
		if err := e.st.CreateRun(ctx, run2, nil); err != nil {
			t.Fatal(err)
		}
		return src, run2
	}
	srcA, runA := mk("a")
	srcB, runB := mk("b")
	_, tok := e.createToken(auth.RoleAdmin, srcA.RoutingKey)

	code, m, _ := e.do("GET", "/api/v1/admin/runs?limit=100", tok, "")
	if code != 200 {
		t.Fatalf("list runs: %d %v", code, m)
	}
	runs := fmt.Sprint(m["runs"])
	if !strings.Contains(runs, runA.ID) || strings.Contains(runs, runB.ID) || fmt.Sprint(m["total"]) != "1" {
		t.Fatalf("scoped run list: %v", m)
	}
	if code, _, _ := e.do("GET", "/api/v1/admin/runs/"+runA.ID, tok, ""); code != 200 {
		t.Fatalf("own run: %d", code)
	}
	for _, p := range []string{"/api/v1/admin/runs/" + runB.ID, "/api/v1/admin/runs/" + runB.ID + "/jobs",
		"/api/v1/admin/generic-sources/" + srcB.ID, "/api/v1/admin/generic-sources/" + srcB.ID + "/webhook-secret"} {
		if code, m, _ := e.do("GET", p, tok, ""); code != 403 || m["error"] != msgScopeMismatch {
			t.Errorf("GET %s with another key's token: %d %v", p, code, m)
		}
	}
	if code, m, _ := e.do("POST", "/api/v1/admin/runs/"+runB.ID+"/cancel", tok, "{}"); code != 403 || m["error"] != msgScopeMismatch {
		t.Errorf("cancel another key's run: %d %v", code, m)
	}
	_, m, _ = e.do("GET", "/api/v1/admin/generic-sources", tok, "")
	if s := fmt.Sprint(m["sources"]); !strings.Contains(s, srcA.ID) || strings.Contains(s, srcB.ID) {
		t.Fatalf("scoped source list: %v", m)
	}
	if code, _, _ := e.do("GET", "/api/v1/admin/generic-sources/"+srcA.ID, tok, ""); code != 200 {
		t.Fatalf("own source: %d", code)
	}
	for _, p := range []string{"/api/v1/admin/event-log", "/api/v1/admin/secrets/scopes?orgId=o", "/api/v1/admin/registrations",
		"/api/v1/admin/access-log", "/api/v1/admin/cluster-settings"} {
		if code, m, _ := e.do("GET", p, tok, ""); code != 403 || m["error"] != msgUnscopedRequired {
			t.Errorf("GET %s with a scoped token: %d %v", p, code, m)
		}
	}
	// The unscoped owner still sees both.
	_, m, _ = e.do("GET", "/api/v1/admin/runs?limit=100", e.owner, "")
	if s := fmt.Sprint(m["runs"]); !strings.Contains(s, runA.ID) || !strings.Contains(s, runB.ID) {
		t.Fatalf("owner list: %v", m)
	}
}

func TestAgentTokenRoutes(t *testing.T) {
	e := newSecEnv(t)
	code, m, _ := e.do("POST", "/api/v1/agent-tokens", e.owner, `{"labels":["linux","gpu","linux"]}`)
	if code != 201 || !strings.HasPrefix(fmt.Sprint(m["token"]), "kat_") || fmt.Sprint(m["labels"]) != "[linux gpu]" || m["agentType"] != "static" {
		t.Fatalf("register: %d %v", code, m)
	}
	id, plain := m["id"].(string), m["token"].(string)
	code, m, _ = e.do("POST", "/api/v1/agent-tokens", e.owner, `{"mandatoryLabels":["secure"]}`)
	if code != 201 || fmt.Sprint(m["mandatoryLabels"]) != "[secure]" {
		t.Fatalf("register tainted: %d %v", code, m)
	}
	if ml, err := e.st.AgentTokenMandatoryLabels(context.Background(), m["id"].(string)); err != nil || fmt.Sprint(ml) != "[secure]" {
		t.Fatalf("stored mandatory labels %v %v", ml, err)
	}
	if code, m, _ := e.do("POST", "/api/v1/agent-tokens", e.owner, `{"mandatoryLabels":["a b"]}`); code != 400 {
		t.Fatalf("bad mandatory label: %d %v", code, m)
	}
	if code, m, _ := e.do("POST", "/api/v1/agent-tokens", e.owner, `{"labels":["kici:os:linux"]}`); code != 400 {
		t.Fatalf("reserved label: %d %v", code, m)
	}
	if code, m, _ := e.do("POST", "/api/v1/agent-tokens", e.auditor, `{}`); code != 403 {
		t.Fatalf("auditor: %d %v", code, m)
	}
	_, m, _ = e.do("GET", "/api/v1/agent-tokens", e.owner, "")
	if s := fmt.Sprint(m["tokens"]); !strings.Contains(s, id) || strings.Contains(s, plain) || !strings.Contains(s, "mandatoryLabels:[secure]") {
		t.Fatalf("list (with the tainted token's mandatory labels): %v", m)
	}
	if code, m, _ := e.do("DELETE", "/api/v1/agent-tokens/"+id, e.owner, ""); code != 200 || fmt.Sprint(m["kicked"]) != "1" {
		t.Fatalf("revoke: %d %v", code, m)
	}
	if len(e.kick.ids) != 1 || e.kick.ids[0] != id {
		t.Fatalf("live connections not kicked: %v", e.kick.ids)
	}
	if code, _, _ := e.do("DELETE", "/api/v1/agent-tokens/"+id, e.owner, ""); code != 404 {
		t.Fatalf("second revoke: %d", code)
	}
	if _, err := auth.NewAgentAuth(e.st).Validate(context.Background(), plain); err == nil {
		t.Fatal("revoked agent token still validates")
	}
}

func TestSecretsRoutesNeverReturnValues(t *testing.T) {
	e := newSecEnv(t)
	ctx := context.Background()
	const value = "npm_9f8e7d6c5b4a"
	put := func(path, body string) (int, map[string]any) {
		code, m, _ := e.do("PUT", path, e.owner, body)
		return code, m
	}
	if code, m := put("/api/v1/admin/secrets/acme/release/npm_token", `{"value":"`+value+`"}`); code != 200 || m["set"] != true {
		t.Fatalf("put: %d %v", code, m)
	}
	for _, bad := range []string{"/api/v1/admin/secrets/acme/re%20lease/k", "/api/v1/admin/secrets/acme/release/bad%20key",
		"/api/v1/admin/secrets/acme/vault:x/k", "/api/v1/admin/secrets/acme/a%2F..%2Fb/k"} {
		if code, m := put(bad, `{"value":"x"}`); code != 400 {
			t.Errorf("PUT %s: %d %v, want 400", bad, code, m)
		}
	}
	if code, m := put("/api/v1/admin/secrets/acme/release/empty", `{"value":""}`); code != 400 {
		t.Errorf("empty value: %d %v", code, m)
	}
	if code, m, _ := e.do("POST", "/api/v1/admin/secrets/scopes", e.owner, `{"orgId":"acme","scope":"deploy"}`); code != 200 {
		t.Fatalf("create scope: %d %v", code, m)
	}
	if code, _, _ := e.do("POST", "/api/v1/admin/secrets/scopes", e.owner, `{"orgId":"acme","scope":"deploy"}`); code != 409 {
		t.Fatalf("duplicate scope: %d", code)
	}
	code, m, _ := e.do("GET", "/api/v1/admin/secrets/scopes?orgId=acme", e.owner, "")
	if code != 200 || fmt.Sprint(m["scopes"]) != "[pg:deploy pg:release]" {
		t.Fatalf("scopes: %d %v", code, m)
	}
	code, m, _ = e.do("GET", "/api/v1/admin/secrets/keys?orgId=acme&scope=pg:release", e.owner, "")
	if code != 200 || fmt.Sprint(m["keys"]) != "[npm_token]" {
		t.Fatalf("keys: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", "/api/v1/admin/secrets/keys?orgId=acme&scope=nope", e.owner, ""); code != 404 {
		t.Fatalf("unknown scope: %d", code)
	}
	if code, _, _ := e.do("GET", "/api/v1/admin/secrets/scopes", e.owner, ""); code != 400 {
		t.Fatalf("missing orgId: %d", code)
	}
	// The value is nowhere in any answer, only in the store, sealed.
	for _, p := range []string{"/api/v1/admin/secrets/scopes?orgId=acme", "/api/v1/admin/secrets/keys?orgId=acme&scope=release", "/api/v1/admin/access-log"} {
		_, m, _ := e.do("GET", p, e.owner, "")
		if strings.Contains(fmt.Sprint(m), value) {
			t.Fatalf("%s leaks the value: %v", p, m)
		}
	}
	sealed, err := e.st.GetSecret(ctx, "acme", "release", "npm_token")
	if err != nil || bytes.Contains(sealed.Ciphertext, []byte(value)) {
		t.Fatalf("stored in clear: %v", err)
	}
	if got, err := e.svc.Resolve(ctx, "acme", "release", "npm_token", "job:test"); err != nil || got != value {
		t.Fatalf("resolve: %q %v", got, err)
	}
	// Another org cannot read it: AAD binds org:scope:key.
	if err := e.st.PutSecret(ctx, &store.SealedSecret{OrgID: "evil", Scope: "release", Key: "npm_token", Ciphertext: sealed.Ciphertext}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Resolve(ctx, "evil", "release", "npm_token", "job:x"); err == nil {
		t.Fatal("a ciphertext copied to another org opened")
	}
	if err := e.st.DeleteSecretScope(ctx, "evil", "release", nil); err != nil {
		t.Fatal(err)
	}
	// Writes and reads are in the access log.
	_, m, _ = e.do("GET", "/api/v1/admin/access-log", e.owner, "")
	log := fmt.Sprint(m["entries"])
	for _, want := range []string{"secret.set", "secret.scope.create", "secret.resolve", "secret:acme:release:npm_token", "job:test"} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %q: %s", want, log)
		}
	}
	// Deletes.
	if code, _, _ := e.do("DELETE", "/api/v1/admin/secrets/acme/release/npm_token", e.owner, ""); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	if code, _, _ := e.do("DELETE", "/api/v1/admin/secrets/acme/release/npm_token", e.owner, ""); code != 404 {
		t.Fatalf("second delete: %d", code)
	}
	if code, _, _ := e.do("DELETE", "/api/v1/admin/secrets/scopes/acme/deploy", e.owner, ""); code != 200 {
		t.Fatalf("delete scope: %d", code)
	}
	if _, m, _ := e.do("GET", "/api/v1/admin/secrets/scopes?orgId=acme", e.owner, ""); fmt.Sprint(m["scopes"]) != "[pg:release]" {
		t.Fatalf("after scope delete: %v", m)
	}
}

// Secrets stay readable after a master-key rotation: with the new key as
// current and the old one as KICI_SECRET_KEY_OLD, rotate-key re-encrypts
// everything; afterwards the new key alone opens all of it.
func TestRotateKeyKeepsSecretsReadable(t *testing.T) {
	e := newSecEnv(t)
	ctx := context.Background()
	for i := range 3 {
		if err := e.svc.Put(ctx, "acme", "release", fmt.Sprintf("k%d", i), fmt.Sprintf("value-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	getenv := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	during, err := masterkey.LoadRing("", getenv(map[string]string{"KICI_SECRET_KEY": keyHex(2), "KICI_SECRET_KEY_OLD": keyHex(1)}))
	if err != nil {
		t.Fatal(err)
	}
	a := auth.NewAdminAuth(e.st, nil)
	srv := httptest.NewServer(NewRouter(Deps{Store: e.st, Auth: a, Secrets: secrets.New(e.st, during)}))
	defer srv.Close()
	e2 := &env{t: t, st: e.st, srv: srv, owner: e.owner, auditor: e.auditor}
	if code, m, _ := e2.do("POST", "/api/v1/admin/rotate-key", e.auditor, ""); code != 403 {
		t.Fatalf("auditor rotating: %d %v", code, m)
	}
	code, m, _ := e2.do("POST", "/api/v1/admin/rotate-key", e.owner, "")
	if code != 200 || fmt.Sprint(m["reEncrypted"]) != "3" {
		t.Fatalf("rotate: %d %v", code, m)
	}
	after, _ := masterkey.LoadRing("", getenv(map[string]string{"KICI_SECRET_KEY": keyHex(2)}))
	svc := secrets.New(e.st, after)
	if err := svc.VerifyKey(ctx); err != nil {
		t.Fatalf("new key alone: %v", err)
	}
	for i := range 3 {
		if v, err := svc.Resolve(ctx, "acme", "release", fmt.Sprintf("k%d", i), "t"); err != nil || v != fmt.Sprintf("value-%d", i) {
			t.Fatalf("k%d after rotation: %q %v", i, v, err)
		}
	}
	// The old key alone no longer opens the data, and says so clearly.
	old, _ := masterkey.LoadRing("", getenv(map[string]string{"KICI_SECRET_KEY": keyHex(1)}))
	if err := secrets.New(e.st, old).VerifyKey(ctx); err == nil || !strings.Contains(err.Error(), "does not decrypt 3 of 3") {
		t.Fatalf("old key: %v", err)
	}
	_, m, _ = e.do("GET", "/api/v1/admin/access-log?action=key.rotate", e.owner, "")
	if !strings.Contains(fmt.Sprint(m["entries"]), "master_key") {
		t.Fatalf("rotation not in the access log: %v", m)
	}
}

// Admin writes outside the token/secret families and webhook-secret reads
// are in the access log too; reads and failed writes are not.
func TestEveryAdminWriteAndSecretReadIsLogged(t *testing.T) {
	e := newSecEnv(t)
	repo := gitRepo(t)
	code, m, _ := e.do("POST", "/api/v1/admin/generic-sources", e.owner,
		fmt.Sprintf(`{"orgId":"demo","name":"app","providerType":"local","localConfig":{"path":%q}}`, repo))
	if code != 201 {
		t.Fatalf("create source: %d %v", code, m)
	}
	id := m["source"].(map[string]any)["id"].(string)
	if code, m, _ := e.do("POST", "/api/v1/admin/generic-sources", e.owner, `{"orgId":"demo"}`); code != 400 {
		t.Fatalf("bad create: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", "/api/v1/admin/generic-sources/"+id+"/webhook-secret", e.owner, ""); code != 200 {
		t.Fatalf("read secret: %d", code)
	}
	e.do("GET", "/api/v1/admin/generic-sources", e.owner, "")
	_, m, _ = e.do("GET", "/api/v1/admin/access-log", e.auditor, "")
	entries := m["entries"].([]any)
	var actions []string
	for _, x := range entries {
		actions = append(actions, x.(map[string]any)["action"].(string))
	}
	want := []string{"source.secret.read", "POST /api/v1/admin/generic-sources"}
	if fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Fatalf("access log actions %v, want %v", actions, want)
	}
	first := entries[0].(map[string]any)
	if first["resource"] != "/api/v1/admin/generic-sources/"+id+"/webhook-secret" || first["tokenLabel"] != "owner" || first["role"] != "owner" {
		t.Fatalf("entry %v", first)
	}
}
