package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"kici.dev/kici/internal/provenance"
)

// writeSignedBundle signs a statement and token with a fresh key and
// writes bundle.json and jwks.json into dir.
func writeSignedBundle(t *testing.T, dir, issuer string) (bundle, jwks string) {
	t.Helper()
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, kid, err := provenance.PublicJWK(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	sha := strings.Repeat("a", 40)
	tok, err := provenance.MintToken(priv, kid, &provenance.Claims{Issuer: issuer, Audience: jwt.Audience{provenance.DefaultAudience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(provenance.TokenTTL)),
		RunID: "r1", JobID: "j1", Repository: "acme/app", Ref: "refs/heads/main", SHA: sha, WorkflowRef: "release@" + sha})
	if err != nil {
		t.Fatal(err)
	}
	st := &provenance.Statement{Type: provenance.StatementType, PredicateType: provenance.PredicateTypeSLSA,
		Subject: []provenance.Subject{{Name: "app", Digest: map[string]string{"sha256": strings.Repeat("1", 64)}}},
		Predicate: provenance.SLSAProvenance{
			BuildDefinition: provenance.BuildDefinition{BuildType: provenance.BuildType,
				ExternalParameters: provenance.ExternalParameters{Workflow: provenance.WorkflowParams{Repository: "acme/app", Ref: "refs/heads/main", Path: "release@" + sha}},
				InternalParameters: provenance.InternalParameters{Commit: sha, RunID: "r1", JobID: "j1", AttestedOn: now.Format(time.RFC3339)}},
			RunDetails: provenance.RunDetails{Builder: provenance.Builder{ID: issuer + "/orchestrator/x"}}}}
	b, err := provenance.SignStatement(context.Background(), st, priv, kid, tok)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(b)
	bundle, jwks = filepath.Join(dir, "bundle.json"), filepath.Join(dir, "jwks.json")
	set, _ := json.Marshal(map[string]any{"keys": []json.RawMessage{pub}})
	if err := os.WriteFile(bundle, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jwks, set, 0o600); err != nil {
		t.Fatal(err)
	}
	return bundle, jwks
}

func TestVerifyAttestationCommand(t *testing.T) {
	dir := t.TempDir()
	const iss = "https://ci.example.test"
	bundle, jwks := writeSignedBundle(t, dir, iss)
	var out, errb bytes.Buffer
	if code := run([]string{"verify-attestation", bundle, "--issuer", iss, "--jwks", jwks, "--digest", "sha256:" + strings.Repeat("1", 64)}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "verified: yes") || !strings.Contains(out.String(), "acme/app@") {
		t.Fatalf("output: %s", out.String())
	}
	out.Reset()
	if code := run([]string{"verify-attestation", bundle, "--issuer", "https://other.example", "--jwks", jwks, "--json"}, &out, &errb); code != 1 {
		t.Fatalf("wrong issuer: exit %d", code)
	}
	var v provenance.Verdict
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Verified || !v.HasReason(provenance.ReasonTokenIssuer) {
		t.Fatalf("verdict %s: %v", out.String(), err)
	}
	out.Reset()
	if code := run([]string{"verify-attestation", bundle, "--issuer", iss, "--jwks", jwks, "--digest", "sha256:" + strings.Repeat("2", 64)}, &out, &errb); code != 1 ||
		!strings.Contains(out.String(), "subject_digest_mismatch") {
		t.Fatalf("digest mismatch: exit %d %s", code, out.String())
	}
	// An empty key set: the key is unknown.
	empty := filepath.Join(dir, "empty.json")
	_ = os.WriteFile(empty, []byte(`{"keys":[]}`), 0o600)
	out.Reset()
	if code := run([]string{"verify-attestation", bundle, "--issuer", iss, "--jwks", empty}, &out, &errb); code != 1 || !strings.Contains(out.String(), "token_key_unknown") {
		t.Fatalf("unknown key: exit %d %s", code, out.String())
	}
	for _, args := range [][]string{{"verify-attestation", filepath.Join(dir, "missing.json"), "--issuer", iss, "--jwks", jwks},
		{"verify-attestation", bundle, "--jwks", jwks}, {"verify-attestation", bundle, "--issuer", iss, "--jwks", jwks, "--digest", "md5:00"}} {
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
