package local

import (
	"context"
	"errors"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/testutil/gitrepo"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testRepo is a real git repository in a temporary directory.
type testRepo = gitrepo.Repo

func newTestRepo(t *testing.T) *testRepo { return gitrepo.New(t) }

func TestReadLockAndChangedFiles(t *testing.T) {
	tr := newTestRepo(t)
	tr.Write("README.md", "hi\n")
	c1 := tr.Commit("no lock")
	tr.Write(".kici/kici.lock.json", `{"schemaVersion":29}`+"\n")
	tr.Write("src/main.go", "package main\n")
	tr.Write("dir with space/a b.txt", "x\n")
	c2 := tr.Commit("lock")
	tr.Git("rm", "-q", "README.md")
	tr.Write("src/main.go", "package main // v2\n")
	c3 := tr.Commit("change")

	repo, err := Open(tr.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if _, err := repo.ReadLock(ctx, c1); !errors.Is(err, ErrLockNotFound) {
		t.Fatalf("lock at c1: %v", err)
	}
	data, err := repo.ReadLock(ctx, strings.ToUpper(c2))
	if err != nil || string(data) != `{"schemaVersion":29}`+"\n" {
		t.Fatalf("lock at c2: %q %v", data, err)
	}
	if _, err := repo.ReadLock(ctx, strings.Repeat("ab", 20)); !errors.Is(err, ErrCommitNotFound) {
		t.Fatalf("unknown commit: %v", err)
	}
	for _, bad := range []string{"main", "--output=/tmp/x", c2[:39], c2 + ":x", "HEAD~1"} {
		if _, err := repo.ReadLock(ctx, bad); !errors.Is(err, ErrInvalidSHA) {
			t.Errorf("ReadLock(%q) = %v, want ErrInvalidSHA", bad, err)
		}
	}

	files, err := repo.ChangedFiles(ctx, c1, c2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".kici/kici.lock.json", "dir with space/a b.txt", "src/main.go"}; !slices.Equal(files, want) {
		t.Fatalf("c1..c2 = %q, want %q", files, want)
	}
	files, err = repo.ChangedFiles(ctx, c2, c3)
	if err != nil || !slices.Equal(files, []string{"README.md", "src/main.go"}) {
		t.Fatalf("c2..c3 = %q %v", files, err)
	}
	files, err = repo.ChangedFiles(ctx, ZeroSHA, c3)
	if err != nil || files == nil || len(files) != 0 {
		t.Fatalf("branch creation: %q %v", files, err)
	}
	if _, err := repo.ChangedFiles(ctx, "-x", c3); !errors.Is(err, ErrInvalidSHA) {
		t.Fatalf("bad before: %v", err)
	}

	sha, err := repo.ResolveCommit(ctx, "main")
	if err != nil || sha != c3 {
		t.Fatalf("resolve main = %s %v (want %s)", sha, err, c3)
	}
	tr.Git("tag", "v1", c2)
	if sha, err := repo.ResolveCommit(ctx, "refs/tags/v1"); err != nil || sha != c2 {
		t.Fatalf("resolve tag = %s %v", sha, err)
	}
	if _, err := repo.ResolveCommit(ctx, "--all"); !errors.Is(err, ErrInvalidRef) {
		t.Fatalf("option-like ref: %v", err)
	}
	if _, err := repo.ResolveCommit(ctx, "nope"); !errors.Is(err, ErrCommitNotFound) {
		t.Fatalf("unknown ref: %v", err)
	}
}

func TestIgnoresCallerGitDir(t *testing.T) {
	a := newTestRepo(t)
	a.Write(".kici/kici.lock.json", "{}\n")
	sha := a.Commit("a")
	b := newTestRepo(t)
	b.Commit("b")
	t.Setenv("GIT_DIR", filepath.Join(b.Dir, ".git"))
	repo, err := Open(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.ReadLock(context.Background(), sha); err != nil {
		t.Fatalf("GIT_DIR leaked into git invocation: %v", err)
	}
}

func TestOpenValidation(t *testing.T) {
	if _, err := Open("relative/path"); err == nil {
		t.Fatal("relative path accepted")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing dir accepted")
	}
}

func TestParsePushPayload(t *testing.T) {
	sha := strings.Repeat("AB", 20)
	p, err := ParsePushPayload([]byte(`{"ref":"refs/heads/main","before":"` + ZeroSHA + `","after":"` + sha + `","repository":{"full_name":"acme/app","path":"/srv/app"},"sender":{"login":"dev"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.After != strings.ToLower(sha) || p.Repository.FullName != "acme/app" || p.Sender.Login != "dev" {
		t.Fatalf("%+v", p)
	}
	for _, bad := range []string{
		`{"ref":"main","after":"` + sha + `"}`,
		`{"ref":"refs/heads/main"}`,
		`{"ref":"refs/heads/main","after":"HEAD"}`,
		`{"ref":"refs/heads/main","after":"` + sha + `","before":"--x"}`,
		`not json`,
	} {
		if _, err := ParsePushPayload([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	for ref, want := range map[string][2]string{
		"refs/heads/feature/x": {"push", "feature/x"},
		"refs/tags/v1.2":       {"tag", "v1.2"},
		"refs/notes/x":         {"push", "refs/notes/x"},
	} {
		if typ, name := RefKind(ref); string(typ) != want[0] || name != want[1] {
			t.Errorf("RefKind(%s) = %s %s", ref, typ, name)
		}
	}
}

func TestPushEvent(t *testing.T) {
	sha := strings.Repeat("ab", 20)
	p := &PushPayload{Ref: "refs/heads/main", Before: ZeroSHA, After: sha,
		Repository: PushRepository{FullName: "acme/app", Path: "/srv/app"}, Sender: PushSender{Login: "dev"}}
	ev := PushEvent(p, "acme/app", []string{"a.go"})
	if ev.Type != "push" || ev.TargetBranch != "main" || ev.SourceRepo != "acme/app" || ev.Provider != provider.Local ||
		ev.SenderUsername != "dev" || !slices.Equal(ev.ChangedFiles, []string{"a.go"}) || ev.Payload["after"] != sha {
		t.Fatalf("%+v", ev)
	}
	p.Ref = "refs/tags/v2.0.0"
	if ev := PushEvent(p, "acme/app", nil); ev.Type != "tag" || ev.TargetBranch != "v2.0.0" {
		t.Fatalf("tag: %+v", ev)
	}
}
