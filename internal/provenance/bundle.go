package provenance

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math/big"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// BundleMediaType is the media type of a kici provenance bundle (KiCI).
const BundleMediaType = "application/vnd.kici.provenance.bundle+json;version=0.1"

// Bundle is a kici provenance bundle: the DSSE envelope over the in-toto
// statement, plus the verification material (the signing public JWK and the
// identity token).
type Bundle struct {
	MediaType            string               `json:"mediaType"`
	DSSEEnvelope         *dsse.Envelope       `json:"dsseEnvelope"`
	VerificationMaterial VerificationMaterial `json:"verificationMaterial"`
}

// VerificationMaterial carries the public key whose RFC 7638 thumbprint is
// the DSSE keyid, and the identity token (ES256 JWT).
type VerificationMaterial struct {
	PublicKey     json.RawMessage `json:"publicKey"`
	IdentityToken string          `json:"identityToken"`
}

// ecdsaSV signs and verifies DSSE PAE bytes with ES256, signatures in raw
// r‖s form (64 bytes), keyid = RFC 7638 thumbprint.
type ecdsaSV struct {
	priv *ecdsa.PrivateKey
	pub  *ecdsa.PublicKey
	kid  string
}

// KeyID returns the RFC 7638 thumbprint (dsse.Signer / dsse.Verifier).
func (s *ecdsaSV) KeyID() (string, error) { return s.kid, nil }

// Public returns the public key (dsse.Verifier).
func (s *ecdsaSV) Public() crypto.PublicKey { return s.pub }

// Sign signs SHA-256(data) and returns r‖s, 64 bytes (dsse.Signer).
func (s *ecdsaSV) Sign(_ context.Context, data []byte) ([]byte, error) {
	h := sha256.Sum256(data)
	r, ss, err := ecdsa.Sign(rand.Reader, s.priv, h[:])
	if err != nil {
		return nil, err
	}
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	ss.FillBytes(out[32:])
	return out, nil
}

// Verify checks a 64-byte r‖s signature over SHA-256(data) (dsse.Verifier).
func (s *ecdsaSV) Verify(_ context.Context, data, sig []byte) error {
	if len(sig) != 64 {
		return errors.New("ES256 signature must be 64 bytes (r||s)")
	}
	h := sha256.Sum256(data)
	r, ss := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(s.pub, h[:], r, ss) {
		return errors.New("signature mismatch")
	}
	return nil
}

// SignStatement signs st as a DSSE envelope with priv (whose thumbprint is
// kid) and wraps it with token into a Bundle.
func SignStatement(ctx context.Context, st *Statement, priv *ecdsa.PrivateKey, kid, token string) (*Bundle, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	signer, err := dsse.NewEnvelopeSigner(&ecdsaSV{priv: priv, pub: &priv.PublicKey, kid: kid})
	if err != nil {
		return nil, err
	}
	env, err := signer.SignPayload(ctx, PayloadType, body)
	if err != nil {
		return nil, err
	}
	pub, _, err := PublicJWK(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Bundle{MediaType: BundleMediaType, DSSEEnvelope: env,
		VerificationMaterial: VerificationMaterial{PublicKey: pub, IdentityToken: token}}, nil
}
