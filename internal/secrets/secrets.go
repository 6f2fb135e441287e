// Package secrets stores operator secrets encrypted under the master key and
// resolves them for jobs (see docs/kici-compatibility.md#contexts-and-secrets).
//
// Values are sealed with AES-256-GCM (package masterkey) with the AAD
// "<orgId>:<scope>:<key>", so a ciphertext copied to another row never
// opens. Values are never returned by the admin API; the only reader is
// Resolve, which records every read in the access log.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"kici.dev/kici/internal/boundedre"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

// Backend is the only secret backend kici has: the orchestrator's own store
// (KiCI "pg"). Scopes may be written "pg:<scope>" or "<scope>".
const Backend = "pg"

// MaxValueBytes caps one secret value (64 KiB).
const MaxValueBytes = 64 << 10

var (
	keyRe   = boundedre.MustCompile(`^[A-Za-z0-9._-]{1,255}$`, 1, 255)
	scopeRe = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
	orgRe   = boundedre.MustCompile(`^[A-Za-z0-9._-]{1,255}$`, 1, 255)
)

// ErrInvalid wraps every input validation error.
var ErrInvalid = errors.New("invalid secret reference")

// Service seals, stores and resolves secrets.
type Service struct {
	st   store.SecurityStore
	ring *masterkey.Ring
}

// New returns a Service over st sealing with ring.
func New(st store.SecurityStore, ring *masterkey.Ring) *Service {
	return &Service{st: st, ring: ring}
}

// NormalizeScope strips an optional "pg:" qualifier and validates the scope:
// path segments of [A-Za-z0-9._-] separated by "/", at most 255 bytes, no
// "." or ".." segment. Another qualifier ("vault:...") is refused: kici has
// no other backend.
func NormalizeScope(scope string) (string, error) {
	s := strings.TrimPrefix(scope, Backend+":")
	if len(s) == 0 || len(s) > 255 || !scopeRe.MatchString(s) {
		return "", fmt.Errorf("%w: scope %q must be path segments of letters, digits, '.', '_' or '-' separated by '/' (optionally prefixed %q)", ErrInvalid, scope, Backend+":")
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: scope %q has a %q segment", ErrInvalid, scope, seg)
		}
	}
	return s, nil
}

// ValidateKey checks a key name: 1–255 of [A-Za-z0-9._-] (KiCI).
func ValidateKey(key string) error {
	if !keyRe.MatchString(key) {
		return fmt.Errorf("%w: key %q must be 1-255 letters, digits, '.', '_' or '-'", ErrInvalid, key)
	}
	return nil
}

// ValidateOrg checks an org id: 1–255 of [A-Za-z0-9._-].
func ValidateOrg(org string) error {
	if !orgRe.MatchString(org) {
		return fmt.Errorf("%w: orgId %q must be 1-255 letters, digits, '.', '_' or '-'", ErrInvalid, org)
	}
	return nil
}

// ParseRef splits a step's secret reference "scope:key" (the scope may carry
// the "pg:" qualifier and "/" segments; the key is after the last ':').
func ParseRef(ref string) (scope, key string, err error) {
	i := strings.LastIndexByte(ref, ':')
	if i <= 0 || i == len(ref)-1 {
		return "", "", fmt.Errorf("%w: %q is not <scope>:<key>", ErrInvalid, ref)
	}
	if scope, err = NormalizeScope(ref[:i]); err != nil {
		return "", "", err
	}
	key = ref[i+1:]
	if err := ValidateKey(key); err != nil {
		return "", "", err
	}
	return scope, key, nil
}

// AAD is the additional authenticated data of one secret.
func AAD(org, scope, key string) []byte { return []byte(org + ":" + scope + ":" + key) }

// Put seals value and stores it (creating the scope), with audit in the same
// transaction. value must be non-empty and at most MaxValueBytes.
func (s *Service) Put(ctx context.Context, org, scope, key, value string, audit *store.AccessLogEntry) error {
	if err := ValidateOrg(org); err != nil {
		return err
	}
	scope, err := NormalizeScope(scope)
	if err != nil {
		return err
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	if value == "" || len(value) > MaxValueBytes {
		return fmt.Errorf("%w: value must be 1-%d bytes", ErrInvalid, MaxValueBytes)
	}
	ct, err := s.ring.Seal([]byte(value), AAD(org, scope, key))
	if err != nil {
		return err
	}
	return s.st.PutSecret(ctx, &store.SealedSecret{OrgID: org, Scope: scope, Key: key, Ciphertext: ct}, audit)
}

// Resolve returns the plaintext of org/scope/key and records a
// "secret.resolve" access-log entry naming who (e.g. "job:<jobId>").
// store.ErrNotFound when the secret does not exist.
func (s *Service) Resolve(ctx context.Context, org, scope, key, who string) (string, error) {
	scope, err := NormalizeScope(scope)
	if err != nil {
		return "", err
	}
	sec, err := s.st.GetSecret(ctx, org, scope, key)
	if err != nil {
		return "", err
	}
	pt, err := s.ring.Open(sec.Ciphertext, AAD(org, scope, key))
	if err != nil {
		return "", fmt.Errorf("secret %s:%s: %w", scope, key, err)
	}
	if err := s.st.AppendAccessLog(ctx, &store.AccessLogEntry{Action: "secret.resolve",
		Resource: Resource(org, scope, key), Detail: who}); err != nil {
		return "", fmt.Errorf("record secret read: %w", err)
	}
	return string(pt), nil
}

// Resource is the access-log resource name of a secret.
func Resource(org, scope, key string) string {
	if key == "" {
		return "secret:" + org + ":" + scope
	}
	return "secret:" + org + ":" + scope + ":" + key
}

// aadOf returns the AAD of a stored sealed value.
func aadOf(v *store.SealedValue) ([]byte, error) {
	switch v.Kind {
	case store.SealedKindSecret:
		return AAD(v.OrgID, v.Scope, v.Key), nil
	case store.SealedKindSigningKey:
		return []byte(provenance.SigningKeyAAD + ":" + v.Kid), nil
	}
	return nil, fmt.Errorf("unknown sealed value kind %q", v.Kind)
}

// VerifyKey opens every stored sealed value (secrets and provenance
// signing keys) with the configured key(s). It fails with a message naming
// the variables to fix when any value does not open, so the orchestrator
// refuses to start rather than serving garbage.
func (s *Service) VerifyKey(ctx context.Context) error {
	vals, err := s.st.ListSealedValues(ctx)
	if err != nil {
		return fmt.Errorf("read sealed values: %w", err)
	}
	bad := 0
	var first string
	for _, v := range vals {
		aad, err := aadOf(v)
		if err != nil {
			return err
		}
		if _, err := s.ring.Open(v.Ciphertext, aad); err != nil {
			if bad == 0 {
				first = describe(v)
			}
			bad++
		}
	}
	if bad > 0 {
		hint := "set KICI_SECRET_KEY (or KICI_SECRET_KEY_FILE) to the key this data was sealed with"
		if s.ring.Old == nil {
			hint += "; when rotating, also set KICI_SECRET_KEY_OLD to the previous key"
		}
		return fmt.Errorf("the configured master key (%s) does not decrypt %d of %d stored sealed values (first: %s): %s",
			s.ring.Current.Source(), bad, len(vals), first, hint)
	}
	return nil
}

func describe(v *store.SealedValue) string {
	if v.Kind == store.SealedKindSigningKey {
		return "provenance signing key " + v.Kid
	}
	return "secret " + v.OrgID + ":" + v.Scope + ":" + v.Key
}

// Rotate re-encrypts every sealed value with the current key (opening each
// with the current or the old key) in one transaction with its audit row,
// and returns the counts {"reEncrypted": secrets, "reEncryptedSigningKeys":
// signing keys}. A value neither key opens aborts the rotation unchanged.
func (s *Service) Rotate(ctx context.Context, audit *store.AccessLogEntry) (map[string]int, error) {
	counts, err := s.st.ResealAll(ctx, func(v *store.SealedValue) ([]byte, error) {
		aad, err := aadOf(v)
		if err != nil {
			return nil, err
		}
		ct, err := s.ring.Reseal(v.Ciphertext, aad)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", describe(v), err)
		}
		return ct, nil
	}, audit)
	if err != nil {
		return nil, err
	}
	return map[string]int{"reEncrypted": counts[store.SealedKindSecret], "reEncryptedSigningKeys": counts[store.SealedKindSigningKey]}, nil
}

// Store exposes the underlying store (scopes and keys listing).
func (s *Service) Store() store.SecurityStore { return s.st }
