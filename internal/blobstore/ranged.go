package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// RangeOpener is a Store that reads part of an object without fetching the
// rest: the step-log archive reads one compressed chunk of a large log this
// way, so a page costs the same wherever it lies. Both backends implement it.
type RangeOpener interface {
	// OpenRange returns a reader over the n bytes of key from byte off.
	// The bytes are not checked against the object's recorded SHA-256
	// (the caller checks what it reads; a compressed chunk carries its
	// own checksum). ErrNotFound when the key does not exist; a range past
	// the object's end reads short.
	OpenRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
}

// OpenRange reads n bytes of key from off through st's RangeOpener, or, for
// a Store without one, by opening the whole object and skipping off bytes.
func OpenRange(ctx context.Context, st Store, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("blob range %d+%d of %s: offset and length must not be negative", off, n, key)
	}
	if ro, ok := st.(RangeOpener); ok {
		return ro.OpenRange(ctx, key, off, n)
	}
	rc, err := st.Open(ctx, key, "")
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, rc, off); err != nil && !errors.Is(err, io.EOF) {
		rc.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, n), rc}, nil
}

// OpenRange implements RangeOpener with a positioned read of the file.
func (d *Dir) OpenRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	f, err := d.openFile(key)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, n), f}, nil
}

// OpenRange implements RangeOpener with an HTTP Range request.
func (s *S3) OpenRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return io.NopCloser(eofReader{}), nil
	}
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: k,
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("s3 get %s range %d+%d: %w", key, off, n, err)
	}
	// A server that ignores Range sends the whole object: keep to the range.
	if out.ContentRange == nil && off > 0 {
		if _, err := io.CopyN(io.Discard, out.Body, off); err != nil {
			out.Body.Close()
			return nil, fmt.Errorf("s3 get %s range %d+%d: %w", key, off, n, err)
		}
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(out.Body, n), out.Body}, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
