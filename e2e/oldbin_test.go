package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The previous release's binaries, built from this repository's own git
// history: there are no release tags, so "previous release" is the newest
// commit on the first-parent line of HEAD whose PostgreSQL schema is one
// migration behind HEAD's. The binaries are built from `git archive` of
// that commit with this Go toolchain and cached by commit hash outside the
// repository (/var/cache/kici-test/upgrade-bins/<hash>, else
// <GOCACHE>/../upgrade-bins/<hash>), so only the first run
// pays the compile.

// migrationsTable is the file listing each migration's per-dialect version.
const migrationsTable = "internal/store/sqlstore/migrations_render.go"

var migrationRow = regexp.MustCompile(`\{"\w+", (\d+), (\d+)\}`)

// pgSchemaAt is the PostgreSQL schema version of commit rev: the highest
// postgres version in its migrations table (0 when the file is absent).
func pgSchemaAt(repo, rev string) (int, error) {
	out, err := gitOut(repo, "show", rev+":"+migrationsTable)
	if err != nil {
		return 0, nil
	}
	v := 0
	for _, m := range migrationRow.FindAllStringSubmatch(out, -1) {
		if n, _ := strconv.Atoi(m[2]); n > v {
			v = n
		}
	}
	return v, nil
}

func gitOut(repo string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// previousRelease returns the newest commit of HEAD's first-parent history
// whose PostgreSQL schema is one migration behind HEAD's, and both
// versions. It skips the test when git or the history is not available.
func previousRelease(t *testing.T) (commit string, prev, head int) {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitOut(repo, "rev-parse", "--verify", "HEAD"); err != nil {
		t.Skipf("the upgrade from the previous release's binaries needs this repository's git history, which is not available here: %v", err)
	}
	head, err = pgSchemaAt(repo, "HEAD")
	if err != nil || head < 2 {
		t.Fatalf("HEAD's PostgreSQL schema version: %d %v", head, err)
	}
	// The commits that changed the migrations table, newest first; the
	// parent of the one that raised the version to head's is the previous
	// release.
	list, err := gitOut(repo, "log", "--first-parent", "--format=%H", "HEAD", "--", migrationsTable)
	if err != nil {
		t.Skipf("the upgrade from the previous release's binaries needs this repository's git history: %v", err)
	}
	for _, c := range strings.Fields(list) {
		v, _ := pgSchemaAt(repo, c+"^1")
		if v == head-1 {
			return c + "^1", v, head
		}
		if v < head-1 {
			break
		}
	}
	t.Skipf("no commit one PostgreSQL migration behind HEAD (%d) in this repository's history (a shallow clone?); fetch the full history to run the upgrade from the previous release", head)
	return "", 0, 0
}

// oldBinaries builds (once per commit, cached) kici-orchestrator,
// kici-agent and kici-step-supervisor of commit and returns their
// directory and the commit's full hash.
func oldBinaries(t *testing.T, commit string) (string, string) {
	t.Helper()
	repo, _ := filepath.Abs("..")
	hash, err := gitOut(repo, "rev-parse", commit)
	if err != nil {
		t.Fatal(err)
	}
	// /var/cache/kici-test when writable: every directory on the way is
	// searchable by the unprivileged uids the agent runs steps as (a home
	// directory's cache usually is not); else beside GOCACHE.
	root := "/var/cache/kici-test"
	if os.MkdirAll(filepath.Join(root, "upgrade-bins"), 0o755) != nil {
		gocache, err := exec.Command("go", "env", "GOCACHE").Output()
		if err != nil {
			t.Fatal(err)
		}
		root = filepath.Dir(strings.TrimSpace(string(gocache)))
	}
	dir := filepath.Join(root, "upgrade-bins", hash)
	if _, err := os.Stat(filepath.Join(dir, "kici-step-supervisor")); err == nil {
		return dir, hash
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, hash, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", hash, err, out)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	build := exec.Command("go", "build", "-trimpath", "-o", tmp+"/", "./cmd/kici-orchestrator", "./cmd/kici-agent", "./cmd/kici-step-supervisor")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the previous release (%s): %v\n%s", hash[:12], err, out)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(filepath.Join(dir, "kici-step-supervisor")); serr != nil {
			t.Fatal(err)
		}
	}
	return dir, hash
}
