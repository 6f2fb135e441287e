// Package blobstore keeps large opaque objects (caches, artifacts) behind one
// interface with two backends: the orchestrator's data directory (the
// embedded default) and S3-compatible object storage (a cluster, where no
// node may hold what another node needs).
//
// Every backend streams: a Put reads its body once, hashing it on the way,
// and never holds the whole object in memory (the S3 backend buffers one
// multipart part at a time). A Put is cut the moment its body passes the
// caller's limit and leaves nothing behind; an object becomes visible only
// when it is complete. Open checks the SHA-256 recorded at write while the
// caller reads, and the final Read fails with ErrDigestMismatch when the
// bytes differ.
package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"strings"
)

// Info describes a stored object.
type Info struct {
	// Key is the object's key.
	Key string
	// Size is its length in bytes.
	Size int64
	// SHA256 is the lower-case hex SHA-256 of its content.
	SHA256 string
}

// Store is a blob store. Implementations are safe for concurrent use.
type Store interface {
	// Put streams r into key, replacing any object there. limit > 0 caps
	// the body: once more than limit bytes arrive the write is abandoned,
	// nothing is stored and the error wraps ErrTooLarge. It returns the
	// size and SHA-256 of what it stored.
	Put(ctx context.Context, key string, r io.Reader, limit int64) (Info, error)
	// Open returns a reader over key. When wantSHA256 is not empty the
	// reader hashes the content and its final Read returns
	// ErrDigestMismatch instead of io.EOF if the digest differs (so a
	// corrupted object is never taken for a good one). ErrNotFound when
	// the key does not exist.
	Open(ctx context.Context, key, wantSHA256 string) (io.ReadCloser, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Kind names the backend ("dir" or "s3") for logs and status.
	Kind() string
}

// Errors returned by every backend.
var (
	ErrNotFound       = errors.New("blob not found")
	ErrTooLarge       = errors.New("blob exceeds its size limit")
	ErrDigestMismatch = errors.New("blob content does not match its recorded sha256")
	ErrBadKey         = errors.New("invalid blob key")
)

// keyRe is the alphabet of a key: path segments of letters, digits and
// ". _ - =" separated by "/".
var keyRe = regexp.MustCompile(`^[A-Za-z0-9._=-]+(/[A-Za-z0-9._=-]+)*$`)

// MaxKeyLen bounds a key (S3 allows 1024 bytes).
const MaxKeyLen = 512

// CheckKey returns an error wrapping ErrBadKey unless key is a relative
// slash-separated path without "." or ".." segments, so that no key can
// name a file outside a directory backend's root.
func CheckKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyLen || !keyRe.MatchString(key) {
		return fmt.Errorf("%w %q", ErrBadKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w %q", ErrBadKey, key)
		}
	}
	return nil
}

// meter hashes and counts what passes through it and fails once more than
// limit bytes were read (limit ≤ 0: unlimited).
type meter struct {
	r     io.Reader
	h     hash.Hash
	n     int64
	limit int64
}

func newMeter(r io.Reader, limit int64) *meter {
	return &meter{r: r, h: sha256.New(), limit: limit}
}

func (m *meter) Read(p []byte) (int, error) {
	if m.limit > 0 && int64(len(p)) > m.limit-m.n+1 {
		p = p[:m.limit-m.n+1] // read at most one byte past the limit
	}
	n, err := m.r.Read(p)
	m.n += int64(n)
	m.h.Write(p[:n])
	if m.limit > 0 && m.n > m.limit {
		return n, fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, m.limit)
	}
	return n, err
}

func (m *meter) info(key string) Info {
	return Info{Key: key, Size: m.n, SHA256: hex.EncodeToString(m.h.Sum(nil))}
}

// verifier checks the digest of what is read through it at EOF.
type verifier struct {
	rc   io.ReadCloser
	h    hash.Hash
	want string
	key  string
}

func verify(rc io.ReadCloser, key, want string) io.ReadCloser {
	if want == "" {
		return rc
	}
	return &verifier{rc: rc, h: sha256.New(), want: strings.ToLower(want), key: key}
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("%w: %s has sha256 %s, recorded %s", ErrDigestMismatch, v.key, got, v.want)
		}
	}
	return n, err
}

func (v *verifier) Close() error { return v.rc.Close() }
