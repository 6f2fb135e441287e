package local

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"kici.dev/kici/internal/trigger"
)

// MaxGateFileBytes bounds a file read for a trigger's `requires` gate: the
// gate reads configuration files (package.json, VERSION, …), not data.
const MaxGateFileBytes = 1 << 20

// maxCommitBytes bounds a commit object read for its message.
const maxCommitBytes = 1 << 20

// CommitMessage returns the message of commit sha (everything after the
// header's blank line), for the commitMessage and `[skip ci]` gates.
func (r *Repo) CommitMessage(ctx context.Context, sha string) (string, error) {
	sha, err := r.checkSHA(ctx, sha)
	if err != nil {
		return "", err
	}
	_, data, err := r.object(ctx, sha+"^{commit}", maxCommitBytes, true)
	if err != nil {
		return "", fmt.Errorf("local: commit %s: %w", sha[:12], err)
	}
	_, msg, _ := strings.Cut(string(data), "\n\n")
	return msg, nil
}

// ReadFileAt returns the content of the regular file path at commit sha,
// at most MaxGateFileBytes. A missing path, or one that is not a regular
// file, wraps trigger.ErrFileNotFound.
func (r *Repo) ReadFileAt(ctx context.Context, sha, path string) ([]byte, error) {
	sha, err := r.checkSHA(ctx, sha)
	if err != nil {
		return nil, err
	}
	typ, data, err := r.object(ctx, sha+":"+path, MaxGateFileBytes, true)
	switch {
	case errors.Is(err, errObjectMissing):
		return nil, fmt.Errorf("%s: %w", path, trigger.ErrFileNotFound)
	case errors.Is(err, errObjectTooLarge):
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxGateFileBytes)
	case err != nil:
		return nil, fmt.Errorf("local: read %s at %s: %w", path, sha[:12], err)
	case typ != "blob":
		return nil, fmt.Errorf("%s is not a file: %w", path, trigger.ErrFileNotFound)
	}
	return data, nil
}

// FilesAt is a trigger.FileReader over the files of one commit.
type FilesAt struct {
	Ctx  context.Context
	Repo *Repo
	SHA  string
}

// ReadFile implements trigger.FileReader.
func (f FilesAt) ReadFile(path string) ([]byte, error) { return f.Repo.ReadFileAt(f.Ctx, f.SHA, path) }
