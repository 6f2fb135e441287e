package provenance

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

const issuer = "https://ci.example.test"

type fixture struct {
	st   store.Store
	svc  *Service
	keys *Keys
	mk   *masterkey.Key
	dir  string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mk, err := masterkey.Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	keys := NewKeys(st, mk)
	return &fixture{st: st, keys: keys, mk: mk, dir: dir,
		svc: NewService(st, keys, Config{Issuer: issuer, OrchestratorID: "node-1", Version: "test"})}
}

// run creates a running run/job pair and returns their ids.
func (f *fixture) run(t testing.TB, id, sha string) (string, string) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	run := &store.Run{ID: id, WorkflowName: "release", Status: "running", Provider: "local", RepoIdentifier: "acme/app",
		RepoURL: "/src/app", Ref: "refs/heads/main", SHA: sha, OrgID: "acme", CreatedAt: now, StartedAt: &now}
	job := &store.Job{ID: id + "-job", JobName: "build", BaseJobName: "build", Status: "running", StartedAt: &now}
	if err := f.st.CreateRun(context.Background(), run, []*store.Job{job}); err != nil {
		t.Fatal(err)
	}
	return run.ID, job.ID
}

func digestOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", h)
}

func (f *fixture) attest(t *testing.T, runID, jobID, content string) []byte {
	t.Helper()
	atts, err := f.svc.Attest(context.Background(), runID, jobID, []SubjectInput{{Name: "dist/app.tar.gz", SHA256: digestOf(content)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 1 {
		t.Fatalf("%d attestations", len(atts))
	}
	return atts[0].Bundle
}

func (f *fixture) verify(t *testing.T, bundle []byte, digest *Digest) *Verdict {
	t.Helper()
	v, err := f.svc.Verify(context.Background(), bundle, "", digest)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func reasons(v *Verdict) []string {
	var out []string
	for _, f := range v.Failures {
		out = append(out, string(f.Code)+"/"+string(f.Reason))
	}
	sort.Strings(out)
	return out
}

func decodeBundle(t *testing.T, raw []byte) *Bundle {
	t.Helper()
	var b Bundle
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

func encode(t *testing.T, b *Bundle) []byte {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// independentDSSEVerify checks the envelope signature with crypto/ecdsa
// directly: PAE built by hand, r‖s signature, key from the bundle's JWK.
func independentDSSEVerify(t *testing.T, raw []byte) error {
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
				Kty, Crv, X, Y string
			} `json:"publicKey"`
		} `json:"verificationMaterial"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return err
	}
	body, err := base64.StdEncoding.DecodeString(b.DSSE.Payload)
	if err != nil {
		return err
	}
	pae := fmt.Sprintf("DSSEv1 %d %s %d %s", len(b.DSSE.PayloadType), b.DSSE.PayloadType, len(body), body)
	x, _ := base64.RawURLEncoding.DecodeString(b.VM.PublicKey.X)
	y, _ := base64.RawURLEncoding.DecodeString(b.VM.PublicKey.Y)
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return fmt.Errorf("public key: %v", err)
	}
	sig, err := base64.StdEncoding.DecodeString(b.DSSE.Signatures[0].Sig)
	if err != nil || len(sig) != 64 {
		return fmt.Errorf("signature: %v len %d", err, len(sig))
	}
	h := sha256.Sum256([]byte(pae))
	if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return errors.New("independent DSSE verification failed")
	}
	return nil
}

func TestAttestAndVerify(t *testing.T) {
	f := newFixture(t)
	runID, jobID := f.run(t, "run-1", strings.Repeat("a", 40))
	raw := f.attest(t, runID, jobID, "artifact")
	v := f.verify(t, raw, &Digest{Alg: "sha256", Hex: digestOf("artifact")})
	if !v.Verified || v.Mode != ModeKici || len(v.Failures) != 0 {
		t.Fatalf("verdict: %+v", v)
	}
	if v.Checks != (Checks{Pass, Pass, Pass, Pass, Pass}) {
		t.Fatalf("checks: %+v", v.Checks)
	}
	c := v.Claims
	if c.RunID != runID || c.JobID != jobID || c.Repository != "acme/app" || c.SHA != strings.Repeat("a", 40) ||
		c.WorkflowRef != "release@"+strings.Repeat("a", 40) || c.ID != runID+":"+jobID || c.OrgID != "acme" || c.Issuer != issuer {
		t.Fatalf("claims: %+v", c)
	}
	if c.Expiry.Time().Sub(c.IssuedAt.Time()) != TokenTTL {
		t.Fatalf("token lifetime %s", c.Expiry.Time().Sub(c.IssuedAt.Time()))
	}
	if got := v.Statement.Predicate.RunDetails.Builder.ID; got != issuer+"/orchestrator/node-1" {
		t.Fatalf("builder id %q", got)
	}
	if err := independentDSSEVerify(t, raw); err != nil {
		t.Fatal(err)
	}
	// Header of the token: ES256, kid = thumbprint, typ JWT.
	b := decodeBundle(t, raw)
	hb, _ := base64.RawURLEncoding.DecodeString(strings.Split(b.VerificationMaterial.IdentityToken, ".")[0])
	var hdr map[string]string
	_ = json.Unmarshal(hb, &hdr)
	_, kid, _ := ParsePublicJWK(b.VerificationMaterial.PublicKey)
	if hdr["alg"] != "ES256" || hdr["typ"] != "JWT" || hdr["kid"] != kid || b.DSSEEnvelope.Signatures[0].KeyID != kid {
		t.Fatalf("header %v, kid %s", hdr, kid)
	}
	// Offline verification with the published JWKS gives the same verdict.
	jwks, err := f.keys.JWKS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(jwks)
	ks, err := ParseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	if off := Verify(raw, VerifyOptions{Issuer: issuer, Keys: ks}); !off.Verified {
		t.Fatalf("offline verdict: %+v", off.Failures)
	}
	// The stored private key is sealed: its JSON never appears in clear.
	row, _ := f.st.GetSigningKey(context.Background(), kid)
	if bytes.Contains(row.EncryptedPrivateJWK, []byte(`"d"`)) {
		t.Fatal("private JWK stored in clear")
	}
}

// mint signs a token with the given key and claims mutator, starting from
// the claims of an honest bundle.
func mint(t *testing.T, priv *ecdsa.PrivateKey, kid string, base *Claims, mutate func(*Claims)) string {
	t.Helper()
	c := *base
	mutate(&c)
	tok, err := MintToken(priv, kid, &c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claimsOf(t *testing.T, token string) *Claims {
	t.Helper()
	body, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func rawToken(t *testing.T, header, claims any, sign func(signingInput string) []byte) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return in + "." + base64.RawURLEncoding.EncodeToString(sign(in))
}

func TestEachTamperingHasItsOwnReason(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	runA, jobA := f.run(t, "run-a", strings.Repeat("a", 40))
	runB, jobB := f.run(t, "run-b", strings.Repeat("b", 40))
	good := f.attest(t, runA, jobA, "artifact-a")
	other := f.attest(t, runB, jobB, "artifact-b")
	if v := f.verify(t, good, nil); !v.Verified {
		t.Fatalf("baseline: %v", reasons(v))
	}
	kid, priv, err := f.keys.Active(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := claimsOf(t, decodeBundle(t, good).VerificationMaterial.IdentityToken)
	attacker, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	attackerKid, _ := Thumbprint(&attacker.PublicKey)

	withToken := func(tok string) []byte {
		b := decodeBundle(t, good)
		b.VerificationMaterial.IdentityToken = tok
		return encode(t, b)
	}
	cases := []struct {
		name   string
		bundle func() []byte
		digest *Digest
		want   string
	}{
		{"payload byte changed", func() []byte {
			b := decodeBundle(t, good)
			body, _ := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
			body = bytes.Replace(body, []byte("dist/app.tar.gz"), []byte("dist/app.tar.gx"), 1)
			b.DSSEEnvelope.Payload = base64.StdEncoding.EncodeToString(body)
			return encode(t, b)
		}, nil, codeReason(CodeDSSESignatureInvalid, ReasonDSSESignature)},
		{"wrong issuer in the token", func() []byte {
			return withToken(mint(t, priv, kid, base, func(c *Claims) { c.Issuer = "https://evil.example" }))
		}, nil, codeReason(CodeIdentityTokenInvalid, ReasonTokenIssuer)},
		{"token signed by an unknown key", func() []byte {
			tok := mint(t, attacker, attackerKid, base, func(*Claims) {})
			b := decodeBundle(t, good)
			st := decodeStatement(t, b)
			nb, err := SignStatement(ctx, st, attacker, attackerKid, tok)
			if err != nil {
				t.Fatal(err)
			}
			return encode(t, nb)
		}, nil, codeReason(CodeIdentityTokenInvalid, ReasonTokenKeyUnknown)},
		{"alg none", func() []byte {
			return withToken(rawToken(t, map[string]string{"alg": "none", "kid": kid, "typ": "JWT"}, base, func(string) []byte { return nil }))
		}, nil, codeReason(CodeIdentityTokenInvalid, ReasonTokenAlgNone)},
		{"HS256 with the public key as secret", func() []byte {
			pub := decodeBundle(t, good).VerificationMaterial.PublicKey
			return withToken(rawToken(t, map[string]string{"alg": "HS256", "kid": kid, "typ": "JWT"}, base, func(in string) []byte {
				m := hmac.New(sha256.New, pub)
				m.Write([]byte(in))
				return m.Sum(nil)
			}))
		}, nil, codeReason(CodeIdentityTokenInvalid, ReasonTokenAlgHMAC)},
		{"expired token", func() []byte {
			return withToken(mint(t, priv, kid, base, func(c *Claims) {
				old := c.IssuedAt.Time().Add(-2 * time.Hour)
				c.IssuedAt, c.NotBefore, c.Expiry = jwt.NewNumericDate(old), jwt.NewNumericDate(old), jwt.NewNumericDate(old.Add(TokenTTL))
			}))
		}, nil, codeReason(CodeIdentityTokenInvalid, ReasonTokenExpired)},
		{"keyid not the thumbprint", func() []byte {
			b := decodeBundle(t, good)
			b.DSSEEnvelope.Signatures[0].KeyID = "key-1"
			return encode(t, b)
		}, nil, codeReason(CodeDSSESignatureInvalid, ReasonKeyIDNotThumbprint)},
		{"statement for another run", func() []byte {
			b := decodeBundle(t, good)
			b.DSSEEnvelope = decodeBundle(t, other).DSSEEnvelope
			return encode(t, b)
		}, nil, "" /* several: commit and run differ */},
		{"statement for another commit", func() []byte {
			return withToken(mint(t, priv, kid, base, func(c *Claims) { c.SHA = strings.Repeat("c", 40) }))
		}, nil, codeReason(CodeBuildContextMismatch, ReasonCommitMismatch)},
		{"digest mismatch", func() []byte { return good }, &Digest{Alg: "sha256", Hex: digestOf("something else")},
			codeReason(CodeSubjectDigestMismatch, ReasonDigestNotInSubjects)},
	}
	seen := map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := f.verify(t, tc.bundle(), tc.digest)
			if v.Verified {
				t.Fatalf("tampered bundle verified: %+v", v)
			}
			got := reasons(v)
			if tc.want == "" { // another run: run id and commit both differ
				want := []string{codeReason(CodeBuildContextMismatch, ReasonCommitMismatch), codeReason(CodeBuildContextMismatch, ReasonJobIDMismatch),
					codeReason(CodeBuildContextMismatch, ReasonRunIDMismatch), codeReason(CodeBuildContextMismatch, ReasonWorkflowMismatch)}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("failures %v, want %v", got, want)
				}
				return
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("failures %v, want exactly [%s]", got, tc.want)
			}
			if prev, dup := seen[tc.want]; dup {
				t.Fatalf("reason %s shared with %q", tc.want, prev)
			}
			seen[tc.want] = tc.name
		})
	}
	// Key revoked after signing: its bundles stop verifying at once.
	if _, err := f.keys.Revoke(ctx, kid, "test compromise"); err != nil {
		t.Fatal(err)
	}
	v := f.verify(t, good, nil)
	if got := reasons(v); v.Verified || len(got) != 1 || got[0] != codeReason(CodeIdentityTokenInvalid, ReasonTokenKeyRevoked) {
		t.Fatalf("after revocation: %v", got)
	}
}

func decodeStatement(t *testing.T, b *Bundle) *Statement {
	t.Helper()
	body, _ := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
	var st Statement
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func TestRotationKeepsOldBundlesUntilRevoked(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	runID, jobID := f.run(t, "run-r", strings.Repeat("d", 40))
	before := f.attest(t, runID, jobID, "v1")
	oldKid := decodeBundle(t, before).DSSEEnvelope.Signatures[0].KeyID
	if _, err := f.keys.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	after := f.attest(t, runID, jobID, "v2")
	newKid := decodeBundle(t, after).DSSEEnvelope.Signatures[0].KeyID
	if newKid == oldKid {
		t.Fatal("rotation did not change the signing key")
	}
	for name, b := range map[string][]byte{"before": before, "after": after} {
		if v := f.verify(t, b, nil); !v.Verified {
			t.Fatalf("%s rotation: %v", name, reasons(v))
		}
	}
	jwks, _ := f.keys.JWKS(ctx)
	if len(jwks.Keys) != 2 {
		t.Fatalf("JWKS has %d keys after rotation, want 2", len(jwks.Keys))
	}
	if _, err := f.keys.Revoke(ctx, oldKid, "retired early"); err != nil {
		t.Fatal(err)
	}
	if v := f.verify(t, before, nil); v.Verified || !v.HasReason(ReasonTokenKeyRevoked) {
		t.Fatalf("bundle of revoked key: %v", reasons(v))
	}
	if v := f.verify(t, after, nil); !v.Verified {
		t.Fatalf("bundle of the new key after revoking the old: %v", reasons(v))
	}
	jwks, _ = f.keys.JWKS(ctx)
	if len(jwks.Keys) != 1 || !bytes.Contains(jwks.Keys[0], []byte(newKid)) {
		t.Fatalf("JWKS after revocation: %s", jwks.Keys)
	}
}

func TestKeysSurviveRestartAndConcurrentCreation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Several managers (as several orchestrators on one database) race to
	// create the first key: all end up with the same one.
	var wg sync.WaitGroup
	kids := make([]string, 5)
	for i := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kid, _, err := NewKeys(f.st, f.mk).Active(ctx)
			if err != nil {
				t.Error(err)
			}
			kids[i] = kid
		}()
	}
	wg.Wait()
	for _, k := range kids {
		if k != kids[0] || k == "" {
			t.Fatalf("managers disagree on the active key: %v", kids)
		}
	}
	// A restarted manager decrypts the stored key; another master key cannot.
	if _, _, err := NewKeys(f.st, f.mk).Active(ctx); err != nil {
		t.Fatal(err)
	}
	other, _ := masterkey.New(bytes.Repeat([]byte{9}, masterkey.Size))
	if _, _, err := NewKeys(f.st, other).Active(ctx); err == nil || !strings.Contains(err.Error(), "KICI_SECRET_KEY") {
		t.Fatalf("foreign master key opened the signing key: %v", err)
	}
}

func TestAttestRefusesFinishedOrForeignJobsAndBadSubjects(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	runA, jobA := f.run(t, "run-x", strings.Repeat("e", 40))
	runB, _ := f.run(t, "run-y", strings.Repeat("f", 40))
	good := []SubjectInput{{Name: "a", SHA256: digestOf("a")}}
	if _, err := f.svc.Attest(ctx, runB, jobA, good); !errors.Is(err, ErrJobNotAttestable) {
		t.Fatalf("job of another run: %v", err)
	}
	for _, bad := range [][]SubjectInput{nil, {{Name: "", SHA256: digestOf("a")}}, {{Name: "a\nb", SHA256: digestOf("a")}},
		{{Name: "a", SHA256: "abc"}}, {{Name: "a", SHA256: strings.Repeat("z", 64)}}} {
		if _, err := f.svc.Attest(ctx, runA, jobA, bad); err == nil {
			t.Fatalf("bad subjects %v accepted", bad)
		}
	}
	if _, err := f.st.UpdateJobStatus(ctx, jobA, nil, "success", store.JobUpdate{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Attest(ctx, runA, jobA, good); !errors.Is(err, ErrJobNotAttestable) {
		t.Fatalf("finished job: %v", err)
	}
	if list, _ := f.st.ListAttestations(ctx, runA); len(list) != 0 {
		t.Fatalf("refused requests stored %d bundles", len(list))
	}
	disabled := NewService(f.st, f.keys, Config{})
	if _, err := disabled.Attest(ctx, runA, jobA, good); !errors.Is(err, ErrDisabled) {
		t.Fatalf("disabled service: %v", err)
	}
}

func TestVerifyNeverPanicsOnGarbage(t *testing.T) {
	ks := KeySet{}
	for _, in := range []string{``, `null`, `[]`, `{"mediaType":5}`, `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`,
		`{"mediaType":"` + BundleMediaType + `"}`, `{"mediaType":"` + BundleMediaType + `","dsseEnvelope":{"payload":"!!","signatures":[{}]},"verificationMaterial":{"publicKey":{},"identityToken":"a.b.c"}}`} {
		v := Verify([]byte(in), VerifyOptions{Issuer: issuer, Keys: ks})
		if v.Verified || len(v.Failures) == 0 {
			t.Fatalf("%q: %+v", in, v)
		}
	}
	v := Verify([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`), VerifyOptions{Issuer: issuer})
	if v.Mode != ModeSigstore || v.Failures[0].Code != CodeModeBUnsupported {
		t.Fatalf("sigstore bundle: %+v", v)
	}
}

func TestStatementValidation(t *testing.T) {
	st := &Statement{Type: StatementType, PredicateType: PredicateTypeSLSA,
		Subject: []Subject{{Name: "x", Digest: map[string]string{"sha256": strings.Repeat("A", 64)}}}}
	err := st.Validate()
	if err == nil {
		t.Fatal("invalid statement accepted")
	}
	for _, want := range []string{"lowercase hex", "buildType", "builder.id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := ParseDigest("sha256:" + strings.Repeat("0", 64)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"sha1:" + strings.Repeat("0", 40), "sha256:xyz", strings.Repeat("0", 64)} {
		if _, err := ParseDigest(bad); err == nil {
			t.Errorf("ParseDigest(%q) accepted", bad)
		}
	}
}

// codeReason is how reasons lists a failure: "<code>/<reason>".
func codeReason(c FailureCode, r FailureReason) string { return string(c) + "/" + string(r) }
