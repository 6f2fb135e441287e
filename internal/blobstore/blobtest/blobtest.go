// Package blobtest starts a real S3-protocol server for tests: gofakes3, an
// in-process implementation of the S3 REST API served over HTTP, so the S3
// backend is exercised through the AWS SDK's real requests and signatures.
package blobtest

import (
	"net/http/httptest"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"kici.dev/kici/internal/blobstore"
)

// Bucket is the bucket the test server creates.
const Bucket = "kici-test"

// Server starts an S3 server with Bucket created and returns its URL; it
// stops when the test ends.
func Server(t testing.TB) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

// S3 returns an S3 blob store on a fresh Server, with multipart parts of
// partSize bytes (0: the default).
func S3(t testing.TB, partSize int64) *blobstore.S3 {
	t.Helper()
	st, err := blobstore.NewS3(blobstore.S3Config{
		Bucket: Bucket, Prefix: "kici", Endpoint: Server(t), ForcePathStyle: true,
		AccessKeyID: "test", SecretAccessKey: "test", PartSize: partSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
