package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
)

const e2eIssuer = "https://ci.e2e.example"

// releaseWorkflow builds two files: one attested through the step's
// `attest:` list, one with `kici-agent attest` run inside the step.
func releaseWorkflow(agentBin string) string {
	return `name: release
on:
  push:
    branches: [main]
jobs:
  build:
    steps:
      - name: build
        run: |
          mkdir -p dist
          printf 'app-%s\n' "$KICI_SHA" > dist/app.tar.gz
        attest: [dist/app.tar.gz]
      - name: sbom
        run: |
          echo sbom > dist/sbom.json
          "` + agentBin + `" attest dist/sbom.json
`
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

type attestationItem struct {
	ID            string          `json:"id"`
	JobID         string          `json:"jobId"`
	SubjectName   string          `json:"subjectName"`
	SubjectDigest string          `json:"subjectDigest"`
	Kid           string          `json:"kid"`
	Bundle        json.RawMessage `json:"bundle"`
}

type verdict struct {
	Verified bool              `json:"verified"`
	Mode     string            `json:"mode"`
	Checks   map[string]string `json:"checks"`
	Claims   map[string]any    `json:"claims"`
	Failures []struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	} `json:"failures"`
}

func (v verdict) reasons() []string {
	var out []string
	for _, f := range v.Failures {
		out = append(out, f.Code+"/"+f.Reason)
	}
	return out
}

// verifyOnline posts a bundle to the orchestrator's public verify endpoint.
func (o *orchestrator) verifyOnline(t *testing.T, bundle []byte, digest string) verdict {
	t.Helper()
	body := `{"bundle":` + string(bundle)
	if digest != "" {
		body += `,"digest":"` + digest + `"`
	}
	resp, err := http.Post(o.url+"/v1/verify-attestation", "application/json", strings.NewReader(body+"}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("verify-attestation: %d %s", resp.StatusCode, raw)
	}
	var v verdict
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// kiciVerify runs `kici verify-attestation` and returns its exit code and output.
func kiciVerify(t *testing.T, bundle []byte, args ...string) (int, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(p, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "kici"), append([]string{"verify-attestation", p}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// dsseCheck verifies the envelope signature independently of kici's code:
// PAE assembled by hand, ECDSA P-256 over SHA-256 with crypto/ecdsa, raw
// r‖s signature, key coordinates from the bundle's JWK, and the keyid
// compared with the RFC 7638 thumbprint computed here.
func dsseCheck(t *testing.T, bundle []byte) error {
	t.Helper()
	var b struct {
		DSSE struct {
			PayloadType string `json:"payloadType"`
			Payload     string `json:"payload"`
			Signatures  []struct {
				KeyID string `json:"keyid"`
				Sig   string `json:"sig"`
			} `json:"signatures"`
		} `json:"dsseEnvelope"`
		VM struct {
			PublicKey struct {
				Kty string `json:"kty"`
				Crv string `json:"crv"`
				X   string `json:"x"`
				Y   string `json:"y"`
			} `json:"publicKey"`
		} `json:"verificationMaterial"`
	}
	if err := json.Unmarshal(bundle, &b); err != nil {
		return err
	}
	k := b.VM.PublicKey
	if b.DSSE.PayloadType != "application/vnd.in-toto+json" || k.Kty != "EC" || k.Crv != "P-256" || len(b.DSSE.Signatures) != 1 {
		return fmt.Errorf("unexpected envelope shape: %+v", b)
	}
	tp := sha256.Sum256([]byte(`{"crv":"P-256","kty":"EC","x":"` + k.X + `","y":"` + k.Y + `"}`))
	if got := base64.RawURLEncoding.EncodeToString(tp[:]); got != b.DSSE.Signatures[0].KeyID {
		return fmt.Errorf("keyid %s is not the thumbprint %s", b.DSSE.Signatures[0].KeyID, got)
	}
	body, err := base64.StdEncoding.DecodeString(b.DSSE.Payload)
	if err != nil {
		return err
	}
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d ", len(b.DSSE.PayloadType), b.DSSE.PayloadType, len(body))
	pae = append(pae, body...)
	x, _ := base64.RawURLEncoding.DecodeString(k.X)
	y, _ := base64.RawURLEncoding.DecodeString(k.Y)
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return fmt.Errorf("public key: %v", err)
	}
	sig, err := base64.StdEncoding.DecodeString(b.DSSE.Signatures[0].Sig)
	if err != nil || len(sig) != 64 {
		return fmt.Errorf("signature is not 64 raw bytes: %v", err)
	}
	h := sha256.Sum256(pae)
	if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return fmt.Errorf("DSSE signature does not verify")
	}
	return nil
}

// mutate decodes a bundle into generic JSON, applies f and re-encodes it.
func mutate(t *testing.T, bundle []byte, f func(b map[string]any)) []byte {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(bundle, &b); err != nil {
		t.Fatal(err)
	}
	f(b)
	out, _ := json.Marshal(b)
	return out
}

func b64url(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (o *orchestrator) attestations(t *testing.T, runID string) []attestationItem {
	t.Helper()
	var list struct {
		Attestations []attestationItem `json:"attestations"`
	}
	o.get(t, "/api/v1/admin/runs/"+runID+"/attestations", &list)
	return list.Attestations
}

func TestProvenanceEndToEnd(t *testing.T) { testProvenance(t) }

func TestProvenanceEndToEndPostgres(t *testing.T) {
	testProvenance(t, "KICI_DATABASE_URL="+pgtest.URL(t))
}

// TestProvenanceOrchestratorsShareOneKey starts two orchestrators on one
// PostgreSQL database with the same master key: the second uses the key the
// first created instead of creating another active one; an orchestrator with
// another master key refuses to start rather than sign with nothing.
func TestProvenanceOrchestratorsShareOneKey(t *testing.T) {
	db := pgtest.URL(t)
	secret := "KICI_SECRET_KEY=" + strings.Repeat("ab", 32)
	o1 := startOrchestrator(t, "KICI_ORCHESTRATOR_PROVENANCE_ISSUER="+e2eIssuer, "KICI_DATABASE_URL="+db, secret)
	o2 := startOrchestrator(t, "KICI_ORCHESTRATOR_PROVENANCE_ISSUER="+e2eIssuer, "KICI_DATABASE_URL="+db, secret)
	var j1, j2 struct {
		Keys []map[string]any `json:"keys"`
	}
	o1.get(t, "/.well-known/jwks.json", &j1)
	o2.get(t, "/.well-known/jwks.json", &j2)
	if len(j1.Keys) != 1 || len(j2.Keys) != 1 || j1.Keys[0]["kid"] != j2.Keys[0]["kid"] {
		t.Fatalf("JWKS differ: %v vs %v", j1, j2)
	}
	if _, err := os.Stat(filepath.Join(o2.dataDir, "secret.key")); !os.IsNotExist(err) {
		t.Errorf("a secret.key was generated although KICI_SECRET_KEY is set: %v", err)
	}
	if out := o2.admin(t, "signing-key", "list"); strings.Count(out, "active") != 1 {
		t.Errorf("signing-key list:\n%s", out)
	}

	cmd := exec.Command(filepath.Join(binDir, "kici-orchestrator"))
	cmd.Env = append(cleanEnv(), "KICI_DATA_DIR="+t.TempDir(), "KICI_PORT=0", "KICI_DATABASE_URL="+db,
		"KICI_ORCHESTRATOR_PROVENANCE_ISSUER="+e2eIssuer, "KICI_SECRET_KEY="+strings.Repeat("cd", 32))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "KICI_SECRET_KEY") {
		t.Fatalf("orchestrator with a foreign master key: err %v\n%s", err, out)
	}
}

func testProvenance(t *testing.T, extraEnv ...string) {
	repo := repoWithWorkflows(t, map[string]string{"release.yaml": releaseWorkflow(filepath.Join(binDir, "kici-agent"))})
	sha := git(t, repo, "rev-parse", "HEAD")

	o := startOrchestrator(t, append(extraEnv, "KICI_ORCHESTRATOR_PROVENANCE_ISSUER="+e2eIssuer)...)
	if fi, err := os.Stat(filepath.Join(o.dataDir, "secret.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("master key file: %v %v", fi, err)
	}
	var disc map[string]any
	o.get(t, "/.well-known/openid-configuration", &disc)
	if disc["issuer"] != e2eIssuer || disc["jwks_uri"] != e2eIssuer+"/.well-known/jwks.json" {
		t.Fatalf("discovery: %v", disc)
	}

	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "app", "--quiet")
	r := o.waitRun(t, o.admin(t, "source", "trigger-local", sourceID, "--quiet"), 3*time.Minute)
	if r.Status != "success" {
		t.Fatalf("run %+v", r)
	}

	// Both files are attested, with the digests of what the steps built.
	wantDigest := map[string]string{
		"dist/app.tar.gz": "sha256:" + sha256Hex([]byte("app-"+sha+"\n")),
		"dist/sbom.json":  "sha256:" + sha256Hex([]byte("sbom\n")),
	}
	atts := o.attestations(t, r.RunID)
	if len(atts) != 2 {
		t.Fatalf("%d attestations, want 2: %+v", len(atts), atts)
	}
	var app attestationItem
	for _, a := range atts {
		if wantDigest[a.SubjectName] != a.SubjectDigest {
			t.Errorf("attestation %s: digest %s, want %s", a.SubjectName, a.SubjectDigest, wantDigest[a.SubjectName])
		}
		if a.SubjectName == "dist/app.tar.gz" {
			app = a
		}
	}
	var jobs struct {
		Jobs []jobView `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+r.RunID+"/jobs", &jobs)
	if log := o.logText(t, r.RunID, jobs.Jobs[0].JobID, 0); !strings.Contains(log, "Attested dist/app.tar.gz "+wantDigest["dist/app.tar.gz"]) {
		t.Errorf("build step log lacks the attestation line:\n%s", log)
	}
	if log := o.logText(t, r.RunID, jobs.Jobs[0].JobID, 1); !strings.Contains(log, "attested dist/sbom.json "+wantDigest["dist/sbom.json"]) {
		t.Errorf("sbom step log lacks the kici-agent attest output:\n%s", log)
	}

	// kici-admin lists them and prints the bundle.
	if out := o.admin(t, "attestations", "list", r.RunID); !strings.Contains(out, "dist/app.tar.gz") || !strings.Contains(out, "dist/sbom.json") {
		t.Errorf("attestations list:\n%s", out)
	}
	bundle := []byte(o.admin(t, "attestations", "get", app.ID))

	// Verified by the endpoint, by `kici verify-attestation` (JWKS URL and
	// a downloaded JWKS file), and independently with crypto/ecdsa.
	v := o.verifyOnline(t, bundle, app.SubjectDigest)
	if !v.Verified || v.Mode != "kici" || v.Claims["kici_run_id"] != r.RunID || v.Claims["sha"] != sha || v.Claims["repository"] == "" {
		t.Fatalf("endpoint verdict: %+v", v)
	}
	jwksURL := o.url + "/.well-known/jwks.json"
	if code, out := kiciVerify(t, bundle, "--issuer", e2eIssuer, "--jwks", jwksURL, "--digest", app.SubjectDigest); code != 0 || !strings.Contains(out, "verified: yes") {
		t.Fatalf("kici verify-attestation: exit %d\n%s", code, out)
	}
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	resp, err := http.Get(jwksURL)
	if err != nil {
		t.Fatal(err)
	}
	jwksBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("JWKS lacks CORS *")
	}
	_ = os.WriteFile(jwksFile, jwksBody, 0o600)
	if code, out := kiciVerify(t, bundle, "--issuer", e2eIssuer, "--jwks", jwksFile); code != 0 {
		t.Fatalf("offline kici verify-attestation: exit %d\n%s", code, out)
	}
	if err := dsseCheck(t, bundle); err != nil {
		t.Fatal(err)
	}

	// Tampering, each with its own reason.
	var b map[string]any
	_ = json.Unmarshal(bundle, &b)
	vm := b["verificationMaterial"].(map[string]any)
	token := vm["identityToken"].(string)
	parts := strings.Split(token, ".")
	var hdr map[string]any
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	_ = json.Unmarshal(hb, &hdr)
	pubJWK, _ := json.Marshal(vm["publicKey"])
	attacker, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cases := []struct {
		name   string
		bundle []byte
		digest string
		want   string
	}{
		{"payload byte changed", mutate(t, bundle, func(b map[string]any) {
			env := b["dsseEnvelope"].(map[string]any)
			body, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
			env["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(body, []byte("app.tar.gz"), []byte("app.tar.gx"), 1))
		}), "", "dsse_signature_invalid/dsse_signature_mismatch"},
		{"keyid not the thumbprint", mutate(t, bundle, func(b map[string]any) {
			b["dsseEnvelope"].(map[string]any)["signatures"].([]any)[0].(map[string]any)["keyid"] = "orchestrator-key"
		}), "", "dsse_signature_invalid/dsse_keyid_not_thumbprint"},
		{"digest mismatch", bundle, "sha256:" + sha256Hex([]byte("something else")), "subject_digest_mismatch/digest_not_in_subjects"},
		{"alg none", mutate(t, bundle, func(b map[string]any) {
			h := map[string]any{"alg": "none", "kid": hdr["kid"], "typ": "JWT"}
			b["verificationMaterial"].(map[string]any)["identityToken"] = b64url(h) + "." + parts[1] + "."
		}), "", "identity_token_invalid/token_alg_none"},
		{"HS256 with the public key as secret", mutate(t, bundle, func(b map[string]any) {
			in := b64url(map[string]any{"alg": "HS256", "kid": hdr["kid"], "typ": "JWT"}) + "." + parts[1]
			m := hmac.New(sha256.New, pubJWK)
			m.Write([]byte(in))
			b["verificationMaterial"].(map[string]any)["identityToken"] = in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
		}), "", "identity_token_invalid/token_alg_hmac"},
		{"token signed by an unknown key", mutate(t, bundle, func(b map[string]any) {
			in := b64url(map[string]any{"alg": "ES256", "kid": "attacker-key", "typ": "JWT"}) + "." + parts[1]
			h := sha256.Sum256([]byte(in))
			rr, ss, _ := ecdsa.Sign(rand.Reader, attacker, h[:])
			sig := make([]byte, 64)
			rr.FillBytes(sig[:32])
			ss.FillBytes(sig[32:])
			b["verificationMaterial"].(map[string]any)["identityToken"] = in + "." + base64.RawURLEncoding.EncodeToString(sig)
		}), "", "identity_token_invalid/token_key_unknown"},
	}
	for _, c := range cases {
		v := o.verifyOnline(t, c.bundle, c.digest)
		if got := v.reasons(); v.Verified || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: verified=%v failures %v, want [%s]", c.name, v.Verified, got, c.want)
		}
	}
	if code, out := kiciVerify(t, bundle, "--issuer", "https://other.example", "--jwks", jwksFile); code != 1 || !strings.Contains(out, "token_issuer_mismatch") {
		t.Errorf("wrong trusted issuer: exit %d\n%s", code, out)
	}

	// Rotation: the old bundle still verifies, a new run signs with the new key.
	if out := o.admin(t, "signing-key", "rotate"); !strings.Contains(out, "active") {
		t.Fatalf("rotate: %s", out)
	}
	if v := o.verifyOnline(t, bundle, ""); !v.Verified {
		t.Fatalf("bundle signed before rotation: %v", v.reasons())
	}
	write(t, filepath.Join(repo, "CHANGES.txt"), "second release\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "second")
	r2 := o.waitRun(t, o.admin(t, "source", "trigger-local", sourceID, "--quiet"), 3*time.Minute)
	atts2 := o.attestations(t, r2.RunID)
	if r2.Status != "success" || len(atts2) != 2 || atts2[0].Kid == app.Kid {
		t.Fatalf("second run %+v attestations %+v (old kid %s)", r2, atts2, app.Kid)
	}
	if out := o.admin(t, "signing-key", "list"); !strings.Contains(out, app.Kid) || !strings.Contains(out, "retiring") {
		t.Errorf("signing-key list after rotation:\n%s", out)
	}

	// Revocation: the old key's bundles fail at once, the new ones still verify.
	o.admin(t, "signing-key", "revoke", "--reason", "e2e: simulated compromise", "--", app.Kid)
	v = o.verifyOnline(t, bundle, "")
	if got := v.reasons(); v.Verified || len(got) != 1 || got[0] != "identity_token_invalid/token_key_revoked" {
		t.Errorf("bundle of the revoked key: %v", got)
	}
	if code, out := kiciVerify(t, bundle, "--issuer", e2eIssuer, "--jwks", jwksURL); code != 1 || !strings.Contains(out, "token_key_unknown") {
		t.Errorf("kici verify-attestation after revocation: exit %d\n%s", code, out)
	}
	if v := o.verifyOnline(t, atts2[0].Bundle, ""); !v.Verified {
		t.Errorf("bundle of the new key after revoking the old: %v", v.reasons())
	}
}
