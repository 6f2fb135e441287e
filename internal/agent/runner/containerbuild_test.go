package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/lockfile"
)

// TestContainerBuildContextHash: the hash changes with a file of the
// context, a build argument or the Dockerfile path, and not with .git or
// files outside the context.
func TestContainerBuildContextHash(t *testing.T) {
	repo := t.TempDir()
	ctx := filepath.Join(repo, "ci")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ctx, ".git"), 0o755))
	must(os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM base\n"), 0o644))
	must(os.WriteFile(filepath.Join(ctx, "a.txt"), []byte("a"), 0o644))
	b := &lockfile.ContainerBuild{Context: "ci", Dockerfile: "Dockerfile", Args: map[string]string{"V": "1"}}
	hash := func(b *lockfile.ContainerBuild) string {
		t.Helper()
		dir, _, err := buildPaths(repo, b)
		must(err)
		h, err := contextHash(dir, b, nil)
		must(err)
		return h
	}
	h0 := hash(b)
	must(os.WriteFile(filepath.Join(repo, "README"), []byte("outside"), 0o644))
	must(os.WriteFile(filepath.Join(ctx, ".git", "HEAD"), []byte("ref"), 0o644))
	if hash(b) != h0 {
		t.Error("a file outside the context or in .git changed the hash")
	}
	must(os.WriteFile(filepath.Join(ctx, "a.txt"), []byte("b"), 0o644))
	h1 := hash(b)
	if h1 == h0 {
		t.Error("a changed file of the context kept the hash")
	}
	if hash(&lockfile.ContainerBuild{Context: "ci", Dockerfile: "Dockerfile", Args: map[string]string{"V": "2"}}) == h1 {
		t.Error("another build argument kept the hash")
	}
}

// TestContainerBuildPathsStayInTheRepository: a context or Dockerfile
// reached through a symbolic link leaving the checkout is refused.
func TestContainerBuildPathsStayInTheRepository(t *testing.T) {
	repo, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "Dockerfile"), []byte("FROM x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(repo, "ctx")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "Dockerfile"), filepath.Join(repo, "Dockerfile")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*lockfile.ContainerBuild{{Context: "ctx", Dockerfile: "Dockerfile"}, {Context: ".", Dockerfile: "Dockerfile"}} {
		if _, _, err := buildPaths(repo, b); err == nil || !strings.Contains(err.Error(), "repository") && !strings.Contains(err.Error(), "inside the context") {
			t.Errorf("%+v: err = %v, want a refusal", b, err)
		}
	}
}

// TestGitCredentialSplitsUserAndToken: "<user>:<token>" or a token alone.
func TestGitCredentialSplitsUserAndToken(t *testing.T) {
	for v, want := range map[string][2]string{"bot:t0k": {"bot", "t0k"}, "ghp_abc": {DefaultGitUser, "ghp_abc"}, "oauth2:a:b": {"oauth2", "a:b"}} {
		if u, tok := gitCredential(v); u != want[0] || tok != want[1] {
			t.Errorf("%q: %s / %s", v, u, tok)
		}
	}
}
