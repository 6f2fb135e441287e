// Package masterkey loads kici's master key and seals small values under it
// with AES-256-GCM.
//
// The key is 32 bytes, taken from the first of (KiCI's variable names;
// see docs/kici-compatibility.md#contexts-and-secrets):
//
//  1. KICI_SECRET_KEY: the key itself, 64 hex characters or standard/URL
//     base64 of 32 bytes;
//  2. KICI_SECRET_KEY_FILE: a file holding the key in the same encoding;
//  3. the embedded default <data dir>/secret.key, generated (32 random bytes,
//     base64) with mode 0600 on first use. An existing file readable by group
//     or others is refused.
//
// Sealed values are "v1" || 12-byte nonce || ciphertext+tag, with caller
// supplied additional authenticated data (AAD) that binds a ciphertext to its
// purpose (e.g. "orchestrator-signing-key"): a value sealed for one purpose
// never opens for another. This package is deliberately small; master-key
// rotation (KICI_SECRET_KEY_OLD) is not part of it yet.
package masterkey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Size is the master key length in bytes (AES-256).
const Size = 32

// FileName is the embedded default key file inside the data directory.
const FileName = "secret.key"

// Source names where a loaded key came from (Key.Source): SourceEnv,
// SourceFile or SourceDataDir, kici's key sources (docs/configuration.md).
type Source string

// Sources of a loaded key.
const (
	// SourceEnv: the key is KICI_SECRET_KEY's value.
	SourceEnv Source = "KICI_SECRET_KEY"
	// SourceFile: the key was read from the file KICI_SECRET_KEY_FILE names.
	SourceFile Source = "KICI_SECRET_KEY_FILE"
	// SourceDataDir: the key is the data directory's FileName.
	SourceDataDir Source = "data-dir"
)

// version prefixes every sealed value.
var version = []byte("v1")

// ErrOpen is returned by Open when a sealed value is malformed, was sealed
// under another key or AAD, or was altered.
var ErrOpen = errors.New("masterkey: cannot open sealed value (wrong key, wrong purpose or tampered)")

// Key is a loaded master key. It is safe for concurrent use.
type Key struct {
	aead   cipher.AEAD
	source Source
}

// New returns a Key from 32 raw bytes.
func New(raw []byte) (*Key, error) {
	if len(raw) != Size {
		return nil, fmt.Errorf("masterkey: key must be %d bytes, got %d", Size, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead}, nil
}

// Source reports where the key came from: SourceEnv, SourceFile or
// SourceDataDir ("" for New).
func (k *Key) Source() Source { return k.source }

// Load resolves the master key as described in the package documentation.
// getenv reads the environment (os.Getenv when nil). dataDir is only used
// when neither variable is set. Errors name the variable or file at fault.
func Load(dataDir string, getenv func(string) string) (*Key, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if v := strings.TrimSpace(getenv("KICI_SECRET_KEY")); v != "" {
		raw, err := decode(v)
		if err != nil {
			return nil, fmt.Errorf("KICI_SECRET_KEY: %w", err)
		}
		k, err := New(raw)
		if err != nil {
			return nil, err
		}
		k.source = SourceEnv
		return k, nil
	}
	if p := strings.TrimSpace(getenv("KICI_SECRET_KEY_FILE")); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("KICI_SECRET_KEY_FILE: %w", err)
		}
		raw, err := decode(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("KICI_SECRET_KEY_FILE %s: %w", p, err)
		}
		k, err := New(raw)
		if err != nil {
			return nil, err
		}
		k.source = SourceFile
		return k, nil
	}
	if dataDir == "" {
		return nil, errors.New("masterkey: no KICI_SECRET_KEY, KICI_SECRET_KEY_FILE or data directory")
	}
	raw, err := loadOrCreate(filepath.Join(dataDir, FileName))
	if err != nil {
		return nil, err
	}
	k, err := New(raw)
	if err != nil {
		return nil, err
	}
	k.source = SourceDataDir
	return k, nil
}

// loadOrCreate reads path, or creates it with a fresh key (O_EXCL, so two
// processes racing on one data directory end up with the same key).
func loadOrCreate(path string) ([]byte, error) {
	for range 2 {
		fi, err := os.Stat(path)
		if err == nil {
			if fi.Mode().Perm()&0o077 != 0 {
				return nil, fmt.Errorf("masterkey: %s is accessible by group or others (mode %04o); run chmod 600 %s", path, fi.Mode().Perm(), path)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("masterkey: %w", err)
			}
			raw, err := decode(strings.TrimSpace(string(b)))
			if err != nil {
				return nil, fmt.Errorf("masterkey: %s: %w", path, err)
			}
			return raw, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("masterkey: %w", err)
		}
		raw := make([]byte, Size)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("masterkey: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue // another process created it: read theirs
		}
		if err != nil {
			return nil, fmt.Errorf("masterkey: create %s: %w", path, err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n")
		cerr := f.Close()
		if werr != nil || cerr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("masterkey: write %s: %v", path, errors.Join(werr, cerr))
		}
		return raw, nil
	}
	return nil, fmt.Errorf("masterkey: %s could not be read or created", path)
}

// decode accepts 64 hex characters or base64 (standard or URL, padded or
// not) of exactly 32 bytes.
func decode(s string) ([]byte, error) {
	if len(s) == 2*Size {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == Size {
			return b, nil
		}
	}
	return nil, fmt.Errorf("key must be %d bytes as 64 hex characters or base64", Size)
}

// Seal encrypts plaintext bound to aad (the purpose). The result is safe to
// store; only Open with the same key and aad recovers plaintext.
func (k *Key) Seal(plaintext, aad []byte) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte{}, version...)
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plaintext, aad), nil
}

// Open decrypts a value made by Seal with the same aad; ErrOpen otherwise.
func (k *Key) Open(sealed, aad []byte) ([]byte, error) {
	ns := k.aead.NonceSize()
	if len(sealed) < len(version)+ns+k.aead.Overhead() || string(sealed[:len(version)]) != string(version) {
		return nil, ErrOpen
	}
	nonce := sealed[len(version) : len(version)+ns]
	pt, err := k.aead.Open(nil, nonce, sealed[len(version)+ns:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
