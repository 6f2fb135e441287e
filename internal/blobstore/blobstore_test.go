package blobstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/blobstore/blobtest"
)

// backends returns a fresh store of each kind: the data directory and a
// real S3-protocol server (gofakes3) over HTTP.
func backends(t *testing.T) map[string]blobstore.Store {
	d, err := blobstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]blobstore.Store{"dir": d, "s3": blobtest.S3(t, 5<<20)}
}

func TestRoundTripAndDigest(t *testing.T) {
	ctx := context.Background()
	for name, st := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, size := range []int{0, 1000, 12 << 20} { // empty, one part, three parts
				body := make([]byte, size)
				rand.Read(body)
				sum := sha256.Sum256(body)
				info, err := st.Put(ctx, "caches/org/k1", bytes.NewReader(body), 0)
				if err != nil {
					t.Fatalf("put %d: %v", size, err)
				}
				if info.Size != int64(size) || info.SHA256 != hex.EncodeToString(sum[:]) {
					t.Fatalf("put %d: info %+v", size, info)
				}
				rc, err := st.Open(ctx, "caches/org/k1", info.SHA256)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("read back %d bytes (want %d): %v", len(got), size, err)
				}
				// A wrong recorded digest fails the read at its end.
				rc, _ = st.Open(ctx, "caches/org/k1", hex.EncodeToString(make([]byte, 32)))
				_, err = io.ReadAll(rc)
				rc.Close()
				if !errors.Is(err, blobstore.ErrDigestMismatch) {
					t.Fatalf("wrong digest: err = %v", err)
				}
			}
			if err := st.Delete(ctx, "caches/org/k1"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Open(ctx, "caches/org/k1", ""); !errors.Is(err, blobstore.ErrNotFound) {
				t.Fatalf("after delete: %v", err)
			}
			if err := st.Delete(ctx, "caches/org/k1"); err != nil {
				t.Fatalf("delete missing: %v", err)
			}
		})
	}
}

func TestLimitCutsAndKeepsNothing(t *testing.T) {
	ctx := context.Background()
	for name, st := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, size := range []int{4096, 11 << 20} {
				limit := int64(size - 1)
				_, err := st.Put(ctx, "a/big", io.LimitReader(rand.Reader, int64(size)), limit)
				if !errors.Is(err, blobstore.ErrTooLarge) {
					t.Fatalf("size %d limit %d: err = %v", size, limit, err)
				}
				if _, err := st.Open(ctx, "a/big", ""); !errors.Is(err, blobstore.ErrNotFound) {
					t.Fatalf("a cut upload left an object: %v", err)
				}
				// Exactly at the limit is accepted.
				if _, err := st.Put(ctx, "a/exact", io.LimitReader(rand.Reader, limit), limit); err != nil {
					t.Fatalf("at the limit: %v", err)
				}
			}
		})
	}
}

// An endless body is cut after the limit: the read stops instead of
// consuming the stream (nothing is buffered whole).
func TestLimitStopsEndlessBody(t *testing.T) {
	for name, st := range backends(t) {
		t.Run(name, func(t *testing.T) {
			r := &countingReader{}
			_, err := st.Put(context.Background(), "endless", r, 6<<20)
			if !errors.Is(err, blobstore.ErrTooLarge) {
				t.Fatalf("err = %v", err)
			}
			if r.n > 16<<20 {
				t.Fatalf("read %d bytes of an endless body with a 6 MiB limit", r.n)
			}
		})
	}
}

type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

func TestDirRejectsEscapingKeysAndLeavesNoTemp(t *testing.T) {
	root := t.TempDir()
	d, err := blobstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"", "../x", "a/../../x", "/abs", "a//b", "a/./b", "a\\b"} {
		if _, err := d.Put(ctx, k, bytes.NewReader([]byte("x")), 0); !errors.Is(err, blobstore.ErrBadKey) {
			t.Errorf("key %q: err = %v", k, err)
		}
	}
	if _, err := d.Put(ctx, "k", io.LimitReader(rand.Reader, 100), 10); !errors.Is(err, blobstore.ErrTooLarge) {
		t.Fatalf("100 bytes under a limit of 10: err = %v, want ErrTooLarge", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "tmp")); len(ents) != 0 {
		t.Fatalf("temp files left after a cut upload: %v", ents)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	dir := t.TempDir()
	st, err := blobstore.FromEnv(env(nil), dir)
	if err != nil || st.Kind() != "dir" {
		t.Fatalf("default: %v %v", st, err)
	}
	for _, bad := range []map[string]string{
		{"KICI_STORAGE_TYPE": "gcs"},
		{"KICI_STORAGE_TYPE": "s3"},
		{"KICI_STORAGE_TYPE": "filesystem", "KICI_STORAGE_FS_PATH": "rel"},
		{"KICI_STORAGE_TYPE": "s3", "KICI_STORAGE_BUCKET": "b", "KICI_STORAGE_FORCE_PATH_STYLE": "yes please"},
	} {
		if _, err := blobstore.FromEnv(env(bad), dir); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
