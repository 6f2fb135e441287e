package provenance

import (
	"crypto/ecdsa"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TokenTTL is the identity token lifetime: exp = iat + 600 s (KiCI).
const TokenTTL = 600 * time.Second

// DefaultAudience is the identity token audience (KiCI "kici-provenance").
const DefaultAudience = "kici-provenance"

// Claims are the identity token claims
// (see docs/kici-compatibility.md#provenance). Every identity claim is
// read from the orchestrator's own run and job rows, never from the agent.
type Claims struct {
	Issuer    string           `json:"iss"`
	Subject   string           `json:"sub"`
	Audience  jwt.Audience     `json:"aud"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	Expiry    *jwt.NumericDate `json:"exp"`
	// ID is "<runId>:<jobId>".
	ID string `json:"jti"`

	RunID          string `json:"kici_run_id"`
	JobID          string `json:"kici_job_id"`
	Repository     string `json:"repository"`
	Ref            string `json:"ref"`
	SHA            string `json:"sha"`
	OrgID          string `json:"org_id"`
	Provider       string `json:"provider"`
	OrchestratorID string `json:"orchestrator_id"`
	// WorkflowRef is "<workflow name>@<sha>".
	WorkflowRef string `json:"workflow_ref"`
	// SourceOrigin is "triggered" or "run-remote".
	SourceOrigin string `json:"source_origin"`
	// StatementHash is null for a live mint (KiCI binds it only for
	// deferred re-mints, which kici does not perform).
	StatementHash *string `json:"statement_hash"`
	// AttestationOrigin is "live".
	AttestationOrigin string `json:"attestation_origin"`
}

// ClaimNames lists the claims kici issues (claims_supported in the OIDC
// discovery document).
var ClaimNames = []string{"iss", "sub", "aud", "iat", "nbf", "exp", "jti", "kici_run_id", "kici_job_id",
	"repository", "ref", "sha", "org_id", "provider", "orchestrator_id", "workflow_ref", "source_origin",
	"statement_hash", "attestation_origin"}

// MintToken signs claims as a compact JWS with header {alg: ES256, kid,
// typ: JWT}.
func MintToken(priv *ecdsa.PrivateKey, kid string, c *Claims) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	return jwt.Signed(sig).Claims(c).Serialize()
}
