package provenance

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

// SigningKeyAAD is the additional authenticated data prefix of a sealed
// private signing JWK (KiCI's "orchestrator-signing-key"); kici appends
// ":<kid>" so a sealed key cannot be moved to another row.
const SigningKeyAAD = "orchestrator-signing-key"

// Alg is the only signature algorithm kici issues and accepts (ES256, ECDSA
// P-256 with SHA-256; RFC 7518 §3.4).
const Alg = "ES256"

// ErrNoSigningKey is returned when the store has no active key and none
// could be created.
var ErrNoSigningKey = errors.New("provenance: no active signing key")

// Thumbprint returns the RFC 7638 SHA-256 JWK thumbprint of pub,
// base64url without padding: kici's kid and DSSE keyid.
func Thumbprint(pub *ecdsa.PublicKey) (string, error) {
	jwk := jose.JSONWebKey{Key: pub}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// PublicJWK returns the public JWK of pub (EC P-256, alg ES256, use sig,
// kid = thumbprint) as JSON.
func PublicJWK(pub *ecdsa.PublicKey) (json.RawMessage, string, error) {
	kid, err := Thumbprint(pub)
	if err != nil {
		return nil, "", err
	}
	b, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: Alg, Use: "sig"})
	return b, kid, err
}

// ParsePublicJWK parses an EC P-256 public JWK and returns the key and its
// RFC 7638 thumbprint. Private or non-P-256 keys are refused.
func ParsePublicJWK(b []byte) (*ecdsa.PublicKey, string, error) {
	var jwk jose.JSONWebKey
	if err := json.Unmarshal(b, &jwk); err != nil {
		return nil, "", fmt.Errorf("invalid JWK: %w", err)
	}
	if !jwk.IsPublic() {
		return nil, "", errors.New("JWK is not a public key")
	}
	pub, ok := jwk.Key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, "", errors.New("JWK is not an EC P-256 key")
	}
	kid, err := Thumbprint(pub)
	if err != nil {
		return nil, "", err
	}
	return pub, kid, nil
}

// Keys manages the orchestrator's signing keys in the store: creation of the
// first key (once, guarded by the database's one-active-key index so that
// several orchestrators sharing a database never both create one), rotation,
// revocation, and the trusted key set. Private halves are sealed under the
// master key and decrypted only in memory.
type Keys struct {
	st  store.ProvenanceStore
	mk  *masterkey.Key
	now func() time.Time

	mu    sync.Mutex
	cache map[string]*ecdsa.PrivateKey
}

// NewKeys returns a key manager over st, sealing with mk. A nil mk gives a
// read-only manager (KeySet, JWKS) whose Active and Rotate fail.
func NewKeys(st store.ProvenanceStore, mk *masterkey.Key) *Keys {
	return &Keys{st: st, mk: mk, now: func() time.Time { return time.Now().UTC() }, cache: map[string]*ecdsa.PrivateKey{}}
}

// generate makes a new P-256 key and its sealed store row.
func (k *Keys) generate() (*store.SigningKey, *ecdsa.PrivateKey, error) {
	if k.mk == nil {
		return nil, nil, errors.New("provenance: no master key loaded")
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	pub, kid, err := PublicJWK(&priv.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	privJSON, err := json.Marshal(jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: Alg, Use: "sig"})
	if err != nil {
		return nil, nil, err
	}
	sealed, err := k.mk.Seal(privJSON, []byte(SigningKeyAAD+":"+kid))
	if err != nil {
		return nil, nil, err
	}
	return &store.SigningKey{Kid: kid, PublicJWK: pub, EncryptedPrivateJWK: sealed, Alg: Alg, SignerKind: "db",
		CreatedAt: k.now().Truncate(time.Millisecond)}, priv, nil
}

// Active returns the active key's kid and private half, creating the first
// key when the store has none. When another orchestrator creates one at the
// same moment, the database refuses the second and this one uses theirs.
func (k *Keys) Active(ctx context.Context) (string, *ecdsa.PrivateKey, error) {
	for range 3 {
		row, err := k.st.GetActiveSigningKey(ctx)
		if err == nil {
			priv, err := k.private(row)
			return row.Kid, priv, err
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", nil, err
		}
		row, priv, err := k.generate()
		if err != nil {
			return "", nil, err
		}
		err = k.st.CreateActiveSigningKey(ctx, row)
		if err == nil {
			k.remember(row.Kid, priv)
			return row.Kid, priv, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return "", nil, err
		}
		// Lost the race: read the winner's key.
	}
	return "", nil, ErrNoSigningKey
}

func (k *Keys) remember(kid string, priv *ecdsa.PrivateKey) {
	k.mu.Lock()
	k.cache[kid] = priv
	k.mu.Unlock()
}

// private opens a row's sealed private key and checks it matches the kid.
func (k *Keys) private(row *store.SigningKey) (*ecdsa.PrivateKey, error) {
	k.mu.Lock()
	priv := k.cache[row.Kid]
	k.mu.Unlock()
	if priv != nil {
		return priv, nil
	}
	if k.mk == nil {
		return nil, errors.New("provenance: no master key loaded")
	}
	pt, err := k.mk.Open(row.EncryptedPrivateJWK, []byte(SigningKeyAAD+":"+row.Kid))
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w (is KICI_SECRET_KEY the key it was created with?)", row.Kid, err)
	}
	var jwk jose.JSONWebKey
	if err := json.Unmarshal(pt, &jwk); err != nil {
		return nil, fmt.Errorf("signing key %s: %w", row.Kid, err)
	}
	p, ok := jwk.Key.(*ecdsa.PrivateKey)
	if !ok || p.Curve != elliptic.P256() {
		return nil, fmt.Errorf("signing key %s is not an EC P-256 private key", row.Kid)
	}
	if tp, err := Thumbprint(&p.PublicKey); err != nil || tp != row.Kid {
		return nil, fmt.Errorf("signing key %s does not match its kid", row.Kid)
	}
	k.remember(row.Kid, p)
	return p, nil
}

// Rotate creates a new active key; the previous active key becomes
// retiring and a retiring key becomes retired. Bundles signed with
// the old keys keep verifying until those keys are revoked.
func (k *Keys) Rotate(ctx context.Context) (*store.SigningKey, error) {
	row, priv, err := k.generate()
	if err != nil {
		return nil, err
	}
	if err := k.st.RotateSigningKey(ctx, row); err != nil {
		return nil, err
	}
	k.remember(row.Kid, priv)
	return row, nil
}

// Revoke revokes kid with a reason (required). Everything it signed stops
// verifying at once; a revoked key never comes back. Revoking the active key
// leaves no active key: the next attestation creates a fresh one.
// It reports false when the key was already revoked; ErrNotFound when unknown.
func (k *Keys) Revoke(ctx context.Context, kid, reason string) (bool, error) {
	if reason == "" {
		return false, errors.New("a revocation reason is required")
	}
	ok, err := k.st.RevokeSigningKey(ctx, kid, reason, k.now())
	if err == nil {
		k.mu.Lock()
		delete(k.cache, kid)
		k.mu.Unlock()
	}
	return ok, err
}

// KeySet is a verification key set: the trusted public keys by kid, and the
// kids known to be revoked (empty for a plain JWKS).
type KeySet struct {
	Trusted map[string]*ecdsa.PublicKey
	Revoked map[string]bool
}

// KeySet reads the live key set from the store: trusted = active, retiring
// and retired keys; revoked keys listed separately.
func (k *Keys) KeySet(ctx context.Context) (KeySet, error) {
	rows, err := k.st.ListSigningKeys(ctx)
	if err != nil {
		return KeySet{}, err
	}
	ks := KeySet{Trusted: map[string]*ecdsa.PublicKey{}, Revoked: map[string]bool{}}
	for _, r := range rows {
		if r.Status == store.SigningKeyRevoked {
			ks.Revoked[r.Kid] = true
			continue
		}
		pub, kid, err := ParsePublicJWK(r.PublicJWK)
		if err != nil || kid != r.Kid {
			continue // a corrupt row is never trusted
		}
		ks.Trusted[kid] = pub
	}
	return ks, nil
}

// JWKS is a JSON Web Key Set document ({"keys": [...]}).
type JWKS struct {
	Keys []json.RawMessage `json:"keys"`
}

// JWKS returns the published key set: the public JWKs of the trusted keys,
// newest first; revoked keys are absent.
func (k *Keys) JWKS(ctx context.Context) (*JWKS, error) {
	rows, err := k.st.ListSigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := &JWKS{Keys: []json.RawMessage{}}
	for _, r := range rows {
		if r.Status != store.SigningKeyRevoked {
			out.Keys = append(out.Keys, r.PublicJWK)
		}
	}
	return out, nil
}

// ParseJWKS builds a KeySet from a JWKS document. Entries that are not EC
// P-256 public keys, or whose kid is not their RFC 7638 thumbprint, are
// ignored (other key kinds, e.g. encryption keys, may share a JWKS).
func ParseJWKS(b []byte) (KeySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return KeySet{}, fmt.Errorf("invalid JWKS: %w", err)
	}
	if doc.Keys == nil {
		return KeySet{}, errors.New(`invalid JWKS: no "keys" array`)
	}
	ks := KeySet{Trusted: map[string]*ecdsa.PublicKey{}, Revoked: map[string]bool{}}
	for _, raw := range doc.Keys {
		var hdr struct {
			Kid string `json:"kid"`
			Use string `json:"use"`
		}
		if json.Unmarshal(raw, &hdr) != nil || (hdr.Use != "" && hdr.Use != "sig") {
			continue
		}
		pub, kid, err := ParsePublicJWK(raw)
		if err != nil || (hdr.Kid != "" && hdr.Kid != kid) {
			continue
		}
		ks.Trusted[kid] = pub
	}
	return ks, nil
}
