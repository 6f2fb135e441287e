package provenance

import (
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// FailureCode is KiCI's verdict code of a failed verification rule: one of
// the Code* constants (see docs/kici-compatibility.md#provenance).
type FailureCode string

// Verdict failure codes, KiCI's (see docs/kici-compatibility.md#provenance).
// Each Failure also carries a Reason naming the exact rule that
// failed, so that every kind of tampering is told apart.
const (
	CodeBundleSchemaInvalid     FailureCode = "bundle_schema_invalid"
	CodeStatementSchemaInvalid  FailureCode = "statement_schema_invalid"
	CodeIdentityTokenInvalid    FailureCode = "identity_token_invalid"
	CodeDSSESignatureInvalid    FailureCode = "dsse_signature_invalid"
	CodeBuildContextMismatch    FailureCode = "build_context_mismatch"
	CodeBuildContextUncheckable FailureCode = "build_context_uncheckable"
	CodeSubjectDigestMismatch   FailureCode = "subject_digest_mismatch"
	CodeModeBUnsupported        FailureCode = "mode_b_unsupported"
)

// FailureReason names the precise rule a verification failed: one of the
// Reason* constants, kici's refinement of FailureCode (docs/provenance.md).
type FailureReason string

// Failure reasons (kici's refinement of KiCI's verdict codes; see docs/provenance.md).
const (
	ReasonBundleMalformed      FailureReason = "bundle_malformed"
	ReasonMediaTypeUnsupported FailureReason = "media_type_unsupported"
	ReasonPayloadType          FailureReason = "payload_type_invalid"
	ReasonStatementInvalid     FailureReason = "statement_invalid"
	ReasonTokenMalformed       FailureReason = "token_malformed"
	ReasonTokenAlgNone         FailureReason = "token_alg_none"
	ReasonTokenAlgHMAC         FailureReason = "token_alg_hmac"
	ReasonTokenAlgNotES256     FailureReason = "token_alg_not_es256"
	ReasonTokenKeyUnknown      FailureReason = "token_key_unknown"
	ReasonTokenKeyRevoked      FailureReason = "token_key_revoked"
	ReasonTokenSignature       FailureReason = "token_signature_invalid"
	ReasonTokenIssuer          FailureReason = "token_issuer_mismatch"
	ReasonTokenAudience        FailureReason = "token_audience_mismatch"
	ReasonTokenExpired         FailureReason = "token_expired"
	ReasonTokenLifetime        FailureReason = "token_lifetime_invalid"
	ReasonKeyIDNotThumbprint   FailureReason = "dsse_keyid_not_thumbprint"
	ReasonDSSEKeyNotTokenKey   FailureReason = "dsse_key_not_token_key"
	ReasonDSSESignature        FailureReason = "dsse_signature_mismatch"
	ReasonRepositoryMismatch   FailureReason = "repository_mismatch"
	ReasonRefMismatch          FailureReason = "ref_mismatch"
	ReasonWorkflowMismatch     FailureReason = "workflow_mismatch"
	ReasonCommitMismatch       FailureReason = "commit_mismatch"
	ReasonRunIDMismatch        FailureReason = "run_id_mismatch"
	ReasonJobIDMismatch        FailureReason = "job_id_mismatch"
	ReasonContextMissing       FailureReason = "build_context_missing"
	ReasonDigestNotInSubjects  FailureReason = "digest_not_in_subjects"
)

// CheckResult is the outcome of one area of a verification (Checks): Pass,
// Fail or Skipped (KiCI's verdict shape, see
// docs/kici-compatibility.md#provenance).
type CheckResult string

// Check results.
const (
	Pass    CheckResult = "pass"
	Fail    CheckResult = "fail"
	Skipped CheckResult = "skipped"
)

// Mode is how a bundle was verified (Verdict.Mode): ModeKici for a bundle
// signed by a kici orchestrator, ModeSigstore for a Sigstore bundle (KiCI's
// mode B, not supported), ModeUnknown when the bundle is neither (see
// docs/kici-compatibility.md#provenance).
type Mode string

// Verification modes.
const (
	ModeKici     Mode = "kici"
	ModeSigstore Mode = "sigstore"
	ModeUnknown  Mode = "unknown"
)

// Leeway is the clock-skew allowance of the token time checks.
const Leeway = 60 * time.Second

// Failure is one failed rule: Code is KiCI's verdict code, Reason the precise rule.
type Failure struct {
	Code    FailureCode   `json:"code"`
	Reason  FailureReason `json:"reason"`
	Message string        `json:"message"`
}

// Checks are the per-area results: pass, fail or skipped.
type Checks struct {
	Schema       CheckResult `json:"schema"`
	JWT          CheckResult `json:"jwt"`
	DSSE         CheckResult `json:"dsse"`
	BuildContext CheckResult `json:"buildContext"`
	Digest       CheckResult `json:"digest"`
}

// Verdict is the verification result (KiCI shape). Verified requires
// schema, jwt, dsse and buildContext to pass and digest not to fail. Claims
// appear once the token signature verified; Statement once the envelope
// signature verified.
type Verdict struct {
	Verified  bool       `json:"verified"`
	Mode      Mode       `json:"mode"`
	Checks    Checks     `json:"checks"`
	Claims    *Claims    `json:"claims,omitempty"`
	Statement *Statement `json:"statement,omitempty"`
	Failures  []Failure  `json:"failures"`
}

// Digest is an expected subject digest (algorithm and lowercase hex).
type Digest struct {
	Alg string `json:"alg"`
	Hex string `json:"hex"`
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Issuer is the trusted issuer, pinned out of band: the issuer named in
	// the token is never trusted by itself. Required.
	Issuer string
	// Audience defaults to DefaultAudience.
	Audience string
	// Digest, when set, must be one of the statement's subject digests.
	Digest *Digest
	// Keys is the key set (live from the store, or a JWKS for offline use).
	Keys KeySet
}

func (v *Verdict) fail(code FailureCode, reason FailureReason, format string, a ...any) {
	v.Failures = append(v.Failures, Failure{Code: code, Reason: reason, Message: fmt.Sprintf(format, a...)})
}

// HasReason reports whether the verdict failed with reason.
func (v *Verdict) HasReason(reason FailureReason) bool {
	for _, f := range v.Failures {
		if f.Reason == reason {
			return true
		}
	}
	return false
}

// Verify checks a bundle exactly as KiCI prescribes. It never panics or
// errors on hostile input: every problem becomes a Failure.
//
//  1. the token issuer must equal opts.Issuer;
//  2. the token algorithm must be ES256 (alg none, HS*, others rejected
//     before any key is used), signed by a key of the trusted set (a revoked
//     kid is reported as such);
//  3. the audience must contain opts.Audience;
//  4. the DSSE keyid must equal the RFC 7638 thumbprint of the bundle's
//     public key, which must be the token's signing key, and the DSSE
//     signature over PAE(payloadType, payload) must verify;
//  5. the statement's workflow repository/ref/path, commit, runId and jobId
//     must equal the token's repository, ref, workflow_ref, sha,
//     kici_run_id, kici_job_id (a hard failure);
//  6. the subject digest is checked when opts.Digest is given.
//
// The token must have been valid when the envelope was signed: the signed
// statement's internalParameters.attestedOn must lie within [nbf, exp]
// (± Leeway), and exp − iat must not exceed TokenTTL. Verification
// therefore keeps working long after the ten-minute token lifetime, while a
// token that was already expired at signing time is rejected.
func Verify(raw []byte, opts VerifyOptions) (v *Verdict) {
	v = &Verdict{Mode: ModeUnknown, Checks: Checks{Schema: Fail, JWT: Skipped, DSSE: Skipped, BuildContext: Skipped, Digest: Skipped}, Failures: []Failure{}}
	defer func() {
		if r := recover(); r != nil {
			v.Verified = false
			v.fail(CodeBundleSchemaInvalid, ReasonBundleMalformed, "bundle could not be processed")
		}
	}()
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}

	// --- schema ---
	var b Bundle
	if err := json.Unmarshal(raw, &b); err != nil {
		v.fail(CodeBundleSchemaInvalid, ReasonBundleMalformed, "bundle is not a JSON object: %v", err)
		return v
	}
	if b.MediaType != BundleMediaType {
		if strings.HasPrefix(b.MediaType, "application/vnd.dev.sigstore.bundle") {
			v.Mode = ModeSigstore
		}
		v.fail(CodeModeBUnsupported, ReasonMediaTypeUnsupported, "media type %q is not supported (want %q)", b.MediaType, BundleMediaType)
		return v
	}
	v.Mode = ModeKici
	env := b.DSSEEnvelope
	switch {
	case env == nil || env.Payload == "" || len(env.Signatures) != 1:
		v.fail(CodeBundleSchemaInvalid, ReasonBundleMalformed, "dsseEnvelope must have a payload and exactly one signature")
		return v
	case b.VerificationMaterial.IdentityToken == "" || len(b.VerificationMaterial.PublicKey) == 0:
		v.fail(CodeBundleSchemaInvalid, ReasonBundleMalformed, "verificationMaterial needs publicKey and identityToken")
		return v
	}
	bundlePub, bundleKid, err := ParsePublicJWK(b.VerificationMaterial.PublicKey)
	if err != nil {
		v.fail(CodeBundleSchemaInvalid, ReasonBundleMalformed, "verificationMaterial.publicKey: %v", err)
		return v
	}
	if env.PayloadType != PayloadType {
		v.fail(CodeStatementSchemaInvalid, ReasonPayloadType, "payloadType %q is not %q", env.PayloadType, PayloadType)
		return v
	}
	body, err := env.DecodeB64Payload()
	if err != nil {
		v.fail(CodeBundleSchemaInvalid, ReasonBundleMalformed, "payload is not base64")
		return v
	}
	var st Statement
	if err := json.Unmarshal(body, &st); err != nil {
		v.fail(CodeStatementSchemaInvalid, ReasonStatementInvalid, "statement is not valid JSON: %v", err)
		return v
	}
	if err := st.Validate(); err != nil {
		v.fail(CodeStatementSchemaInvalid, ReasonStatementInvalid, "statement: %v", err)
		return v
	}
	v.Checks.Schema = Pass

	// --- jwt ---
	claims, tokenKid := verifyToken(v, b.VerificationMaterial.IdentityToken, opts)

	// --- dsse ---
	v.Checks.DSSE = Fail
	sig := env.Signatures[0]
	switch {
	case sig.KeyID != bundleKid:
		v.fail(CodeDSSESignatureInvalid, ReasonKeyIDNotThumbprint, "DSSE keyid %q is not the RFC 7638 thumbprint %q of the bundle's public key", sig.KeyID, bundleKid)
	case tokenKid != "" && tokenKid != bundleKid:
		v.fail(CodeDSSESignatureInvalid, ReasonDSSEKeyNotTokenKey, "the envelope key %q is not the identity token's signing key %q", bundleKid, tokenKid)
	default:
		ver, _ := dsse.NewEnvelopeVerifier(&ecdsaSV{pub: bundlePub, kid: bundleKid})
		if _, err := ver.Verify(context.Background(), env); err != nil {
			v.fail(CodeDSSESignatureInvalid, ReasonDSSESignature, "DSSE signature does not verify over the payload")
		} else if tokenKid == "" {
			// The token's key is unknown: the envelope verifies against a
			// key nothing vouches for, so it cannot pass.
			v.Checks.DSSE = Skipped
		} else {
			v.Checks.DSSE = Pass
			v.Statement = &st
		}
	}

	// Time binding: the token must have been valid when the envelope was
	// signed (attestedOn is covered by the DSSE signature).
	if claims != nil && v.Checks.DSSE == Pass && v.Checks.JWT == Pass {
		signedAt, _ := time.Parse(time.RFC3339, st.Predicate.BuildDefinition.InternalParameters.AttestedOn)
		nbf := claims.NotBefore
		if nbf == nil {
			nbf = claims.IssuedAt
		}
		if signedAt.After(claims.Expiry.Time().Add(Leeway)) || (nbf != nil && signedAt.Before(nbf.Time().Add(-Leeway))) {
			v.Checks.JWT = Fail
			v.fail(CodeIdentityTokenInvalid, ReasonTokenExpired, "the identity token was not valid when the envelope was signed (%s, token valid %s–%s)",
				signedAt.Format(time.RFC3339), nbf.Time().UTC().Format(time.RFC3339), claims.Expiry.Time().UTC().Format(time.RFC3339))
		}
	}

	// --- build context ---
	if claims != nil && v.Checks.JWT == Pass && v.Checks.DSSE == Pass {
		checkBuildContext(v, claims, &st)
	}

	// --- digest ---
	if opts.Digest != nil {
		if v.Checks.DSSE != Pass {
			v.Checks.Digest = Skipped
		} else {
			v.Checks.Digest = Fail
			for _, s := range st.Subject {
				if s.Digest[opts.Digest.Alg] == strings.ToLower(opts.Digest.Hex) {
					v.Checks.Digest = Pass
				}
			}
			if v.Checks.Digest == Fail {
				v.fail(CodeSubjectDigestMismatch, ReasonDigestNotInSubjects, "no subject has digest %s:%s", opts.Digest.Alg, opts.Digest.Hex)
			}
		}
	}

	c := v.Checks
	v.Verified = c.Schema == Pass && c.JWT == Pass && c.DSSE == Pass && c.BuildContext == Pass && c.Digest != Fail && len(v.Failures) == 0
	return v
}

// verifyToken applies rules 1–3 and the lifetime rule. It returns the
// verified claims (nil when the signature did not verify) and the kid of the
// trusted key that signed the token ("" when none).
func verifyToken(v *Verdict, token string, opts VerifyOptions) (*Claims, string) {
	v.Checks.JWT = Fail
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		v.fail(CodeIdentityTokenInvalid, ReasonTokenMalformed, "identity token is not a compact JWS")
		return nil, ""
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err != nil || json.Unmarshal(hb, &hdr) != nil {
		v.fail(CodeIdentityTokenInvalid, ReasonTokenMalformed, "identity token header is not base64url JSON")
		return nil, ""
	}
	alg := strings.ToUpper(strings.TrimSpace(hdr.Alg))
	switch {
	case alg == "NONE" || alg == "":
		v.fail(CodeIdentityTokenInvalid, ReasonTokenAlgNone, "identity token is unsigned (alg %q); only ES256 is accepted", hdr.Alg)
		return nil, ""
	case strings.HasPrefix(alg, "HS"):
		v.fail(CodeIdentityTokenInvalid, ReasonTokenAlgHMAC, "identity token uses symmetric %q; only ES256 is accepted", hdr.Alg)
		return nil, ""
	case hdr.Alg != Alg:
		v.fail(CodeIdentityTokenInvalid, ReasonTokenAlgNotES256, "identity token algorithm %q is not ES256", hdr.Alg)
		return nil, ""
	}
	if opts.Keys.Revoked[hdr.Kid] {
		v.fail(CodeIdentityTokenInvalid, ReasonTokenKeyRevoked, "identity token was signed by revoked key %q", hdr.Kid)
		return nil, ""
	}
	pub := opts.Keys.Trusted[hdr.Kid]
	if pub == nil {
		v.fail(CodeIdentityTokenInvalid, ReasonTokenKeyUnknown, "identity token key %q is not in the issuer's key set", hdr.Kid)
		return nil, ""
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		v.fail(CodeIdentityTokenInvalid, ReasonTokenMalformed, "identity token: %v", err)
		return nil, ""
	}
	var c Claims
	if err := tok.Claims((*ecdsa.PublicKey)(pub), &c); err != nil {
		v.fail(CodeIdentityTokenInvalid, ReasonTokenSignature, "identity token signature does not verify")
		return nil, ""
	}
	v.Claims = &c
	ok := true
	if c.Issuer != opts.Issuer {
		ok = false
		v.fail(CodeIdentityTokenInvalid, ReasonTokenIssuer, "token issuer %q is not the trusted issuer %q", c.Issuer, opts.Issuer)
	}
	if !c.Audience.Contains(opts.Audience) {
		ok = false
		v.fail(CodeIdentityTokenInvalid, ReasonTokenAudience, "token audience %v does not contain %q", []string(c.Audience), opts.Audience)
	}
	if c.Expiry == nil || c.IssuedAt == nil || c.Expiry.Time().Before(c.IssuedAt.Time()) ||
		c.Expiry.Time().Sub(c.IssuedAt.Time()) > TokenTTL+Leeway {
		ok = false
		v.fail(CodeIdentityTokenInvalid, ReasonTokenLifetime, "token must carry iat and exp with exp − iat ≤ %s", TokenTTL)
	}
	if ok {
		v.Checks.JWT = Pass
	}
	return &c, hdr.Kid
}

// checkBuildContext applies rule 5.
func checkBuildContext(v *Verdict, c *Claims, st *Statement) {
	bd := st.Predicate.BuildDefinition
	w := bd.ExternalParameters.Workflow
	ip := bd.InternalParameters
	if c.Repository == "" || c.Ref == "" || c.WorkflowRef == "" || c.SHA == "" || c.RunID == "" || c.JobID == "" {
		v.Checks.BuildContext = Fail
		v.fail(CodeBuildContextUncheckable, ReasonContextMissing, "identity token lacks build context claims")
		return
	}
	pairs := []struct {
		reason            FailureReason
		what, stmt, claim string
	}{
		{ReasonRepositoryMismatch, "workflow.repository/repository", w.Repository, c.Repository},
		{ReasonRefMismatch, "workflow.ref/ref", w.Ref, c.Ref},
		{ReasonWorkflowMismatch, "workflow.path/workflow_ref", w.Path, c.WorkflowRef},
		{ReasonCommitMismatch, "commit/sha", ip.Commit, c.SHA},
		{ReasonRunIDMismatch, "runId/kici_run_id", ip.RunID, c.RunID},
		{ReasonJobIDMismatch, "jobId/kici_job_id", ip.JobID, c.JobID},
	}
	v.Checks.BuildContext = Pass
	for _, p := range pairs {
		if p.stmt != p.claim {
			v.Checks.BuildContext = Fail
			v.fail(CodeBuildContextMismatch, p.reason, "statement %s %q does not match the token's %q", p.what, p.stmt, p.claim)
		}
	}
}
