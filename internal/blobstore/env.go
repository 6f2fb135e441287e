package blobstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// FromEnv builds the configured backend (KiCI's storage settings):
// KICI_STORAGE_TYPE "filesystem" (the default) keeps objects under
// KICI_STORAGE_FS_PATH, else <dataDir>/blobs; "s3" uses KICI_STORAGE_BUCKET
// (required), KICI_STORAGE_PREFIX, KICI_STORAGE_REGION,
// KICI_STORAGE_ENDPOINT, KICI_STORAGE_FORCE_PATH_STYLE (true/false) and the
// credentials AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. getenv is
// os.Getenv when nil.
func FromEnv(getenv func(string) string, dataDir string) (Store, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch t := getenv("KICI_STORAGE_TYPE"); t {
	case "", "filesystem":
		root := getenv("KICI_STORAGE_FS_PATH")
		if root == "" {
			root = filepath.Join(dataDir, "blobs")
		} else if !filepath.IsAbs(root) {
			return nil, fmt.Errorf("KICI_STORAGE_FS_PATH must be an absolute path, got %q", root)
		}
		return NewDir(root)
	case "s3":
		pathStyle := false
		if v := getenv("KICI_STORAGE_FORCE_PATH_STYLE"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("KICI_STORAGE_FORCE_PATH_STYLE: %q is not true or false", v)
			}
			pathStyle = b
		}
		return NewS3(S3Config{
			Bucket: getenv("KICI_STORAGE_BUCKET"), Prefix: getenv("KICI_STORAGE_PREFIX"),
			Region: getenv("KICI_STORAGE_REGION"), Endpoint: getenv("KICI_STORAGE_ENDPOINT"),
			ForcePathStyle: pathStyle,
			AccessKeyID:    getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"),
		})
	default:
		return nil, fmt.Errorf("KICI_STORAGE_TYPE must be filesystem or s3, got %q", t)
	}
}
