// Package provenance implements kici's signed build provenance
// (see docs/kici-compatibility.md#provenance): orchestrator signing keys
// (ES256, P-256; private halves sealed under the master key; statuses
// active, retiring, retired, revoked), in-toto Statement v1 statements with
// the SLSA provenance v1 predicate built from the orchestrator's own run and
// job rows, DSSE envelopes (go-securesystemslib/dsse), identity tokens
// (ES256 JWT via go-jose), the OIDC discovery document and JWKS, and the
// verifier shared by the verify endpoint and `kici verify-attestation`.
//
// Unlike KiCI, where the agent signs the envelope with an ephemeral key and
// the token stands in for a certificate, kici's orchestrator signs both the
// envelope and the token with its active signing key: the agent only reports
// subject names and digests, so a compromised agent can never choose what a
// statement says about its build, and a bundle verifies only while the key
// that signed it is published.
package provenance
