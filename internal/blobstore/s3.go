package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Config configures the S3 backend (KiCI KICI_STORAGE_* settings).
type S3Config struct {
	// Bucket is the bucket objects live in (required; it must exist).
	Bucket string
	// Prefix is prepended to every key ("" for none; a trailing "/" is
	// added when missing).
	Prefix string
	// Region is the signing region ("us-east-1" when empty).
	Region string
	// Endpoint is the service URL for S3-compatible servers (MinIO,
	// versitygw, …); "" means AWS.
	Endpoint string
	// ForcePathStyle addresses buckets as <endpoint>/<bucket> instead of a
	// virtual host, which most self-hosted servers need.
	ForcePathStyle bool
	// AccessKeyID and SecretAccessKey are static credentials.
	AccessKeyID, SecretAccessKey string
	// PartSize is the multipart part size in bytes (DefaultPartSize when
	// 0, at least 5 MiB as S3 requires). It bounds the memory a Put uses.
	PartSize int64
	// HTTPClient overrides the HTTP client (nil: the SDK's default).
	HTTPClient *http.Client
}

// DefaultPartSize is the multipart part size: 8 MiB.
const DefaultPartSize = 8 << 20

// minPartSize is S3's smallest part except the last one.
const minPartSize = 5 << 20

// S3 is the S3-compatible backend. A Put streams the body as a multipart
// upload, one part in memory at a time; a body that fits in one part is a
// single PutObject. A cut or failed upload is aborted, so no partial object
// becomes visible (S3 publishes an object only on CompleteMultipartUpload).
type S3 struct {
	c      *s3.Client
	bucket string
	prefix string
	part   int64
}

// NewS3 returns an S3 backend for cfg.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 blob store: a bucket is required (KICI_STORAGE_BUCKET)")
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	acfg := aws.Config{
		Region: region,
		// S3-compatible servers do not all speak the SDK's default
		// trailing checksums; the content is hashed by us anyway.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.AccessKeyID != "" {
		acfg.Credentials = credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	}
	if cfg.HTTPClient != nil {
		acfg.HTTPClient = cfg.HTTPClient
	}
	c := s3.NewFromConfig(acfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.ForcePathStyle
	})
	part := cfg.PartSize
	if part <= 0 {
		part = DefaultPartSize
	}
	part = max(part, minPartSize)
	prefix := cfg.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3{c: c, bucket: cfg.Bucket, prefix: prefix, part: part}, nil
}

// Kind is "s3".
func (s *S3) Kind() string { return "s3" }

func (s *S3) key(key string) (*string, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	return aws.String(s.prefix + key), nil
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, limit int64) (Info, error) {
	k, err := s.key(key)
	if err != nil {
		return Info{}, err
	}
	m := newMeter(r, limit)
	buf := make([]byte, s.part)
	n, err := io.ReadFull(m, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Info{}, err
	}
	if n < len(buf) { // the whole body fits in one part
		_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: k, Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			return Info{}, fmt.Errorf("s3 put %s: %w", key, err)
		}
		return m.info(key), nil
	}
	up, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: k})
	if err != nil {
		return Info{}, fmt.Errorf("s3 put %s: %w", key, err)
	}
	abort := func(cause error) (Info, error) {
		// A fresh context: the caller's may be what ended the upload.
		_, _ = s.c.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: k, UploadId: up.UploadId})
		return Info{}, cause
	}
	var parts []types.CompletedPart
	for num := int32(1); n > 0; num++ {
		out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &s.bucket, Key: k, UploadId: up.UploadId, PartNumber: aws.Int32(num),
			Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			return abort(fmt.Errorf("s3 put %s part %d: %w", key, num, err))
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		n, err = io.ReadFull(m, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return abort(err)
		}
	}
	if _, err := s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: k, UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		return abort(fmt.Errorf("s3 put %s: %w", key, err))
	}
	return m.info(key), nil
}

// Open implements Store.
func (s *S3) Open(ctx context.Context, key, wantSHA256 string) (io.ReadCloser, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: k})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("s3 get %s: %w", key, err)
	}
	return verify(out.Body, key, wantSHA256), nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	if _, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: k}); err != nil && !isNotFound(err) {
		return fmt.Errorf("s3 delete %s: %w", key, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")
}
