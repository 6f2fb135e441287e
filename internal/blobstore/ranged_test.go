package blobstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"testing"

	"kici.dev/kici/internal/blobstore"
)

// A ranged read returns exactly the bytes asked for, from any offset of a
// multipart object, and a missing key is ErrNotFound.
func TestOpenRangeReadsOnlyTheRange(t *testing.T) {
	ctx := context.Background()
	for name, st := range backends(t) {
		t.Run(name, func(t *testing.T) {
			body := make([]byte, 11<<20) // three parts on the S3 server
			rand.Read(body)
			if _, err := st.Put(ctx, "steplogs/r/j/step-0.chunks", bytes.NewReader(body), 0); err != nil {
				t.Fatal(err)
			}
			for _, r := range [][2]int64{{0, 1}, {5<<20 - 3, 10}, {int64(len(body)) - 100, 100}, {123, 0}, {int64(len(body)) - 5, 50}} {
				rc, err := blobstore.OpenRange(ctx, st, "steplogs/r/j/step-0.chunks", r[0], r[1])
				if err != nil {
					t.Fatalf("range %v: %v", r, err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				want := body[r[0]:min(r[0]+r[1], int64(len(body)))]
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("range %v: %d bytes, err %v; want %d bytes", r, len(got), err, len(want))
				}
			}
			if _, err := blobstore.OpenRange(ctx, st, "steplogs/none", 0, 10); !errors.Is(err, blobstore.ErrNotFound) {
				t.Fatalf("missing key: %v", err)
			}
			if _, err := blobstore.OpenRange(ctx, st, "steplogs/r/j/step-0.chunks", -1, 10); err == nil {
				t.Fatal("a negative offset was accepted")
			}
		})
	}
}
