package masterkey

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Ring is the current master key plus, during a rotation window, the
// previous one (KICI_SECRET_KEY_OLD / KICI_SECRET_KEY_FILE_OLD; see
// docs/kici-compatibility.md#contexts-and-secrets). Values are always sealed with
// Current; Open tries Current, then Old.
type Ring struct {
	// Current seals new values and opens values already rotated.
	Current *Key
	// Old (nil outside a rotation window) opens values not rotated yet.
	Old *Key
}

// LoadRing loads the current key as Load does, and the old key from
// KICI_SECRET_KEY_OLD or KICI_SECRET_KEY_FILE_OLD when one is set. An old key
// equal to the current one is an operator error and is refused.
func LoadRing(dataDir string, getenv func(string) string) (*Ring, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cur, err := Load(dataDir, getenv)
	if err != nil {
		return nil, err
	}
	r := &Ring{Current: cur}
	var raw []byte
	switch {
	case strings.TrimSpace(getenv("KICI_SECRET_KEY_OLD")) != "":
		if raw, err = decode(strings.TrimSpace(getenv("KICI_SECRET_KEY_OLD"))); err != nil {
			return nil, fmt.Errorf("KICI_SECRET_KEY_OLD: %w", err)
		}
	case strings.TrimSpace(getenv("KICI_SECRET_KEY_FILE_OLD")) != "":
		p := strings.TrimSpace(getenv("KICI_SECRET_KEY_FILE_OLD"))
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("KICI_SECRET_KEY_FILE_OLD: %w", err)
		}
		if raw, err = decode(strings.TrimSpace(string(b))); err != nil {
			return nil, fmt.Errorf("KICI_SECRET_KEY_FILE_OLD %s: %w", p, err)
		}
	default:
		return r, nil
	}
	old, err := New(raw)
	if err != nil {
		return nil, err
	}
	// Same key twice: a probe value sealed by one opens with the other.
	probe, err := cur.Seal([]byte("probe"), []byte("probe"))
	if err != nil {
		return nil, err
	}
	if _, err := old.Open(probe, []byte("probe")); err == nil {
		return nil, errors.New("masterkey: KICI_SECRET_KEY_OLD is the same key as the current one; set it to the previous key, or unset it")
	}
	r.Old = old
	return r, nil
}

// Seal seals with the current key.
func (r *Ring) Seal(plaintext, aad []byte) ([]byte, error) { return r.Current.Seal(plaintext, aad) }

// Open opens with the current key, else the old one; ErrOpen when neither
// opens it.
func (r *Ring) Open(sealed, aad []byte) ([]byte, error) {
	pt, err := r.Current.Open(sealed, aad)
	if err == nil || r.Old == nil {
		return pt, err
	}
	return r.Old.Open(sealed, aad)
}

// Reseal opens sealed with either key and seals the plaintext again with the
// current key.
func (r *Ring) Reseal(sealed, aad []byte) ([]byte, error) {
	pt, err := r.Open(sealed, aad)
	if err != nil {
		return nil, err
	}
	return r.Current.Seal(pt, aad)
}
