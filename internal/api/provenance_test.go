package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

const testIssuer = "https://ci.example.test"

// newProvEnv is newEnv with a provenance service (issuer "" = disabled).
func newProvEnv(t *testing.T, issuer string) (*env, *provenance.Service) {
	t.Helper()
	dir := t.TempDir()
	st, a := openTestStore(t, dir)
	owner := issueToken(t, a, auth.RoleOwner)
	auditor := issueToken(t, a, auth.RoleAuditor)
	mk, err := masterkey.Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	svc := provenance.NewService(st, provenance.NewKeys(st, mk), provenance.Config{Issuer: issuer, OrchestratorID: "n1"})
	srv := httptest.NewServer(NewRouter(Deps{Store: st, Auth: a, Version: "test", Provenance: svc}))
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, srv: srv, owner: owner, auditor: auditor}, svc
}

func TestProvenanceRoutesDisabled(t *testing.T) {
	e, _ := newProvEnv(t, "")
	for _, c := range []struct{ method, path, body, want string }{
		{"GET", "/.well-known/openid-configuration", "", "oidc_issuer_not_configured"},
		{"GET", "/.well-known/jwks.json", "", "no_published_keys"},
		{"POST", "/v1/verify-attestation", `{"bundle":{}}`, "provenance_signing_not_configured"},
	} {
		code, m, h := e.do(c.method, c.path, "", c.body)
		if code != 503 || m["error"] != c.want {
			t.Errorf("%s %s: %d %v", c.method, c.path, code, m)
		}
		if strings.HasPrefix(c.path, "/.well-known") && h.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: no CORS header", c.path)
		}
	}
	if code, _, _ := e.do("POST", "/api/v1/admin/signing-keys/rotate", e.owner, ""); code != 503 {
		t.Errorf("rotate while disabled: %d", code)
	}
}

func TestProvenanceRoutes(t *testing.T) {
	e, svc := newProvEnv(t, testIssuer)
	ctx := context.Background()
	now := time.Now().UTC()
	run := &store.Run{ID: "run-1", WorkflowName: "release", Status: status.RunRunning, Provider: provider.Local, RepoIdentifier: "acme/app",
		Ref: "refs/heads/main", SHA: strings.Repeat("a", 40), OrgID: "acme", CreatedAt: now}
	if err := e.st.CreateRun(ctx, run, []*store.Job{{ID: "job-1", JobName: "build", BaseJobName: "build", Status: status.JobRunning}}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("artifact"))
	hexSum := hex.EncodeToString(sum[:])
	atts, err := svc.Attest(ctx, "run-1", "job-1", []provenance.SubjectInput{{Name: "dist/app.tar.gz", SHA256: hexSum}})
	if err != nil {
		t.Fatal(err)
	}
	bundle := string(atts[0].Bundle)

	code, doc, h := e.do("GET", "/.well-known/openid-configuration", "", "")
	if code != 200 || doc["issuer"] != testIssuer || doc["jwks_uri"] != testIssuer+"/.well-known/jwks.json" || h.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("discovery: %d %v", code, doc)
	}
	code, jwks, _ := e.do("GET", "/.well-known/jwks.json", "", "")
	if code != 200 || len(jwks["keys"].([]any)) != 1 {
		t.Fatalf("jwks: %d %v", code, jwks)
	}

	verify := func(body string) map[string]any {
		t.Helper()
		code, m, _ := e.do("POST", "/v1/verify-attestation", "", body)
		if code != 200 {
			t.Fatalf("verify: %d %v", code, m)
		}
		return m
	}
	v := verify(`{"bundle":` + bundle + `,"digest":"sha256:` + hexSum + `"}`)
	if v["verified"] != true || v["mode"] != "kici" || v["checks"].(map[string]any)["digest"] != "pass" {
		t.Fatalf("verdict: %v", v)
	}
	// A bundle passed as a JSON string and the {alg,hex} digest form work too.
	sb, _ := json.Marshal(bundle)
	if v := verify(`{"bundle":` + string(sb) + `,"digest":{"alg":"sha256","hex":"` + strings.Repeat("0", 64) + `"}}`); v["verified"] != false ||
		v["failures"].([]any)[0].(map[string]any)["code"] != "subject_digest_mismatch" {
		t.Fatalf("digest mismatch verdict: %v", v)
	}
	if v := verify(`{"bundle":` + bundle + `,"audience":"someone-else"}`); v["verified"] != false ||
		v["failures"].([]any)[0].(map[string]any)["reason"] != string(provenance.ReasonTokenAudience) {
		t.Fatalf("audience verdict: %v", v)
	}
	for body, want := range map[string]string{`{`: "invalid_json", `{}`: "bundle_required", `{"bundle":null}`: "bundle_required",
		`{"bundle":{},"digest":"md5:00"}`: "invalid_digest"} {
		if code, m, _ := e.do("POST", "/v1/verify-attestation", "", body); code != 400 || m["error"] != want {
			t.Errorf("%s: %d %v", body, code, m)
		}
	}
	if v := verify(`{"bundle":{"mediaType":"x"}}`); v["verified"] != false || v["failures"].([]any)[0].(map[string]any)["code"] != "mode_b_unsupported" {
		t.Fatalf("unknown media type: %v", v)
	}

	// Admin reads.
	code, list, _ := e.do("GET", "/api/v1/admin/runs/run-1/attestations", e.auditor, "")
	items := list["attestations"].([]any)
	if code != 200 || len(items) != 1 || items[0].(map[string]any)["subjectDigest"] != "sha256:"+hexSum {
		t.Fatalf("list: %d %v", code, list)
	}
	if code, m, _ := e.do("GET", "/api/v1/admin/attestations/"+atts[0].ID, e.auditor, ""); code != 200 || m["bundle"] == nil {
		t.Fatalf("get: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", "/api/v1/admin/runs/nope/attestations", e.owner, ""); code != 404 {
		t.Fatalf("unknown run: %d", code)
	}

	// Key management: owner only; rotation keeps old bundles valid; revocation ends them.
	if code, _, _ := e.do("POST", "/api/v1/admin/signing-keys/rotate", e.auditor, ""); code != 403 {
		t.Fatalf("auditor rotate: %d", code)
	}
	code, rotated, _ := e.do("POST", "/api/v1/admin/signing-keys/rotate", e.owner, "")
	if code != 201 || rotated["status"] != "active" || rotated["encryptedPrivateJwk"] != nil {
		t.Fatalf("rotate: %d %v", code, rotated)
	}
	code, keys, _ := e.do("GET", "/api/v1/admin/signing-keys", e.owner, "")
	if code != 200 || len(keys["keys"].([]any)) != 2 {
		t.Fatalf("keys: %d %v", code, keys)
	}
	if v := verify(`{"bundle":` + bundle + `}`); v["verified"] != true {
		t.Fatalf("bundle after rotation: %v", v)
	}
	oldKid := atts[0].Kid
	if code, _, _ := e.do("POST", "/api/v1/admin/signing-keys/"+oldKid+"/revoke", e.owner, `{}`); code != 400 {
		t.Fatalf("revoke without reason: %d", code)
	}
	if code, m, _ := e.do("POST", "/api/v1/admin/signing-keys/"+oldKid+"/revoke", e.owner, `{"reason":"leaked"}`); code != 200 || m["status"] != "revoked" {
		t.Fatalf("revoke: %d %v", code, m)
	}
	if code, _, _ := e.do("POST", "/api/v1/admin/signing-keys/"+oldKid+"/revoke", e.owner, `{"reason":"again"}`); code != 409 {
		t.Fatalf("second revoke: %d", code)
	}
	if code, _, _ := e.do("POST", "/api/v1/admin/signing-keys/nope/revoke", e.owner, `{"reason":"x"}`); code != 404 {
		t.Fatalf("unknown key revoke: %d", code)
	}
	v = verify(`{"bundle":` + bundle + `}`)
	if v["verified"] != false || v["failures"].([]any)[0].(map[string]any)["reason"] != string(provenance.ReasonTokenKeyRevoked) {
		t.Fatalf("bundle after revocation: %v", v)
	}
	_, jwks, _ = e.do("GET", "/.well-known/jwks.json", "", "")
	if ks := jwks["keys"].([]any); len(ks) != 1 || ks[0].(map[string]any)["kid"] == oldKid {
		t.Fatalf("jwks after revocation: %v", jwks)
	}
}
