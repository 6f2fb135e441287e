package lockfile

import (
	"fmt"
	"path"
	"strings"
)

// CacheBase names the directory of the job a cache path lives in. A cache
// holds only the job's own files: its workspace, its HOME or its private
// temporary directory. Anything else (the host's /var/lib, another job's
// directory, the orchestrator's data directory) is refused when the lock is
// compiled and again by the agent before it restores or saves (a lock file
// can be written by hand).
type CacheBase string

// The three places a cache path may name.
const (
	// CacheInWorkspace: a relative path, inside the job's checkout.
	CacheInWorkspace CacheBase = "workspace"
	// CacheInHome: "~" or "~/…", inside the job's HOME.
	CacheInHome CacheBase = "home"
	// CacheInTmp: "/tmp" or "/tmp/…", inside the job's private temporary
	// directory (the one TMPDIR names).
	CacheInTmp CacheBase = "tmp"
)

// CachePathHint is what a refused cache path is told to use instead.
const CachePathHint = "a cache may only hold the job's own files: write a path relative to the workspace (.deps, node_modules), under the job's HOME (~/.cache/go-build) or under its private /tmp (/tmp/build)"

// SplitCachePath returns the base a cache path lives in and the clean,
// slash-separated path below it ("" for the base itself). It refuses
// absolute paths outside /tmp, any ".." segment, "~user" forms,
// variables (they are not expanded) and empty paths. Symbolic links are
// the agent's to check: they exist only on disk.
func SplitCachePath(p string) (CacheBase, string, error) {
	base, rest := CacheInWorkspace, p
	switch {
	case strings.TrimSpace(p) == "":
		return "", "", fmt.Errorf("cache path must not be empty")
	case strings.Contains(p, "$"):
		return "", "", fmt.Errorf("cache path %q: variables are not expanded in cache paths (write ~/… for the job's HOME); %s", p, CachePathHint)
	case p == "~" || strings.HasPrefix(p, "~/"):
		base, rest = CacheInHome, strings.TrimPrefix(p, "~")
	case strings.HasPrefix(p, "~"):
		return "", "", fmt.Errorf("cache path %q: only the job's own HOME (~/…) may be named, not another user's", p)
	case p == "/tmp" || strings.HasPrefix(p, "/tmp/"):
		base, rest = CacheInTmp, strings.TrimPrefix(p, "/tmp")
	case path.IsAbs(p) || strings.Contains(p, `\`):
		return "", "", fmt.Errorf("cache path %q is outside the job's workspace, HOME and /tmp; %s", p, CachePathHint)
	}
	rel := path.Clean("/" + rest)
	for _, seg := range strings.Split(strings.Trim(rest, "/"), "/") {
		if seg == ".." {
			return "", "", fmt.Errorf("cache path %q: \"..\" is not allowed in a cache path; %s", p, CachePathHint)
		}
	}
	return base, strings.TrimPrefix(rel, "/"), nil
}

// CheckArtifactPath refuses an artifact glob that is not inside the
// workspace: absolute paths, "~" and "..". Artifacts are packed from and
// unpacked into the job's checkout only.
func CheckArtifactPath(glob string) error {
	g := strings.TrimPrefix(glob, "!")
	if path.IsAbs(g) || strings.HasPrefix(g, "~") || strings.Contains(g, `\`) {
		return fmt.Errorf("artifact path %q is outside the workspace: artifact paths are globs relative to the job's checkout (bin/**, dist/*.tar.gz)", glob)
	}
	for _, seg := range strings.Split(g, "/") {
		if seg == ".." {
			return fmt.Errorf("artifact path %q: \"..\" may not be used; artifact paths are globs relative to the job's checkout (bin/**, dist/*.tar.gz)", glob)
		}
	}
	return nil
}
