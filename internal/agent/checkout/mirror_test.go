package checkout

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/protocol"
)

// Many jobs checking out at once, of two commits, through one mirror
// cache: every work tree is at its commit with its files, the host keeps a
// single mirror of the repository, a later commit is fetched into it
// incrementally, and the work trees own no object (they borrow the
// mirror's).
func TestMirrorCheckoutConcurrentJobs(t *testing.T) {
	repo, first := agenttest.GitRepo(t, map[string]string{"a.txt": "one"})
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	agenttest.Git(t, repo, "commit", "-q", "-am", "second")
	second := agenttest.Git(t, repo, "rev-parse", "HEAD")
	root := filepath.Join(t.TempDir(), "mirrors")
	url := "file://" + repo

	var wg sync.WaitGroup
	errs := make(chan error, 12)
	dirs := make([]string, 12)
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), "src")
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sha := first
			if i%2 == 1 {
				sha = second
			}
			var log logBuf
			if err := Run(context.Background(), Options{RepoURL: url, SHA: sha, Dir: dirs[i], Log: log.add, MirrorRoot: root}); err != nil {
				errs <- fmt.Errorf("job %d: %v\n%s", i, err, log.String())
				return
			}
			if strings.Contains(log.String(), "fetching directly") {
				errs <- fmt.Errorf("job %d fell back to a direct fetch:\n%s", i, log.String())
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, dir := range dirs {
		want, sha := "one", first
		if i%2 == 1 {
			want, sha = "two", second
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != want {
			t.Errorf("job %d: a.txt = %q, want %q", i, b, want)
		}
		if head := agenttest.Git(t, dir, "rev-parse", "HEAD"); head != sha {
			t.Errorf("job %d: HEAD %s, want %s", i, head, sha)
		}
		if n := countObjects(t, filepath.Join(dir, ".git", "objects")); n != 0 {
			t.Errorf("job %d: work tree holds %d objects of its own, want 0 (borrowed from the mirror)", i, n)
		}
		// A step can still use git normally.
		agenttest.Git(t, dir, "log", "--oneline", "-1")
	}
	entries, _ := os.ReadDir(root)
	var mirrors []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".git") {
			mirrors = append(mirrors, e.Name())
		}
		if strings.HasPrefix(e.Name(), ".new-") {
			t.Errorf("leftover temporary mirror %s", e.Name())
		}
	}
	if len(mirrors) != 1 {
		t.Fatalf("mirrors %v, want one for the repository", mirrors)
	}
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mirror root mode %v %v, want 0700", fi.Mode().Perm(), err)
	}

	// A new commit: the next job fetches it into the same mirror.
	if err := os.WriteFile(filepath.Join(repo, "b.txt"), []byte("three"), 0o644); err != nil {
		t.Fatal(err)
	}
	agenttest.Git(t, repo, "add", "b.txt")
	agenttest.Git(t, repo, "commit", "-q", "-m", "third")
	third := agenttest.Git(t, repo, "rev-parse", "HEAD")
	dir := filepath.Join(t.TempDir(), "src")
	var log logBuf
	if err := Run(context.Background(), Options{RepoURL: url, SHA: third, Dir: dir, Log: log.add, MirrorRoot: root}); err != nil {
		t.Fatalf("third: %v\n%s", err, log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "three" {
		t.Fatalf("b.txt = %q", b)
	}
	if strings.Contains(log.String(), "Created the host mirror") {
		t.Error("the mirror was rebuilt instead of fetched into")
	}
	// A commit the mirror already has costs no fetch.
	log = logBuf{}
	if err := Run(context.Background(), Options{RepoURL: url, SHA: first, Dir: filepath.Join(t.TempDir(), "src"), Log: log.add, MirrorRoot: root}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "Host mirror already has "+first) || strings.Contains(log.String(), " fetch ") {
		t.Errorf("warm checkout fetched:\n%s", log.String())
	}
}

// A mirror that cannot be used (its directory is a file) does not fail the
// job: the checkout falls back to a direct fetch.
func TestMirrorUnusableFallsBack(t *testing.T) {
	repo, sha := agenttest.GitRepo(t, map[string]string{"a.txt": "one"})
	root := filepath.Join(t.TempDir(), "mirrors")
	if err := os.WriteFile(root, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "src")
	var log logBuf
	if err := Run(context.Background(), Options{RepoURL: "file://" + repo, SHA: sha, Dir: dir, Log: log.add, MirrorRoot: root}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one" || !strings.Contains(log.String(), "fetching directly") {
		t.Fatalf("a.txt %q; log:\n%s", b, log.String())
	}
}

func countObjects(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, string(filepath.Separator)+"info"+string(filepath.Separator)) {
			n++
		}
		return nil
	})
	return n
}

// Through the mirror, credentials still travel only as a header: the
// server sees them, while the job log, the mirror's files and the work
// tree's never contain them.
func TestMirrorKeepsCredentialsOut(t *testing.T) {
	const user, secret = "x-access-token", "s3cr3t-mirror-token"
	enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))
	repo, sha := agenttest.GitRepo(t, map[string]string{"a.txt": "private"})
	agenttest.Git(t, repo, "update-server-info")
	files := http.FileServer(http.Dir(filepath.Join(repo, ".git")))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Basic "+enc {
			http.Error(w, "denied", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	root := filepath.Join(t.TempDir(), "mirrors")
	dir := filepath.Join(t.TempDir(), "src")
	var log logBuf
	err := Run(context.Background(), Options{RepoURL: srv.URL + "/", SHA: sha, Dir: dir, MirrorRoot: root,
		Auth: &protocol.SourceAuth{Kind: protocol.AuthBasic, User: user, Secret: secret}, Log: log.add})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "private" {
		t.Fatalf("a.txt = %q", b)
	}
	if strings.Contains(log.String(), "fetching directly") {
		t.Fatalf("mirror not used:\n%s", log.String())
	}
	for _, tree := range []string{root, filepath.Join(dir, ".git")} {
		_ = filepath.WalkDir(tree, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), secret) || strings.Contains(string(b), enc) {
				t.Errorf("credential stored in %s", p)
			}
			return nil
		})
	}
	if strings.Contains(log.String(), secret) || strings.Contains(log.String(), enc) {
		t.Errorf("credential in the job log:\n%s", log.String())
	}
}

// A work tree checked out through the mirror has the origin remote git
// itself would have written, also for a path git config must quote, and
// a second checkout of the same commit (warm mirror) logs that the mirror
// already has it and fetches nothing.
func TestMirrorCheckoutOriginRemote(t *testing.T) {
	base, sha := agenttest.GitRepo(t, map[string]string{"a.txt": "one"})
	repo := filepath.Join(t.TempDir(), `odd;na#me"s\dir`)
	if err := os.Rename(base, repo); err != nil {
		t.Fatal(err)
	}
	url := "file://" + repo
	root := filepath.Join(t.TempDir(), "mirrors")
	for i, want := range []string{"git --git-dir", "Host mirror already has " + sha} {
		dir := filepath.Join(t.TempDir(), "src")
		var log logBuf
		if err := Run(context.Background(), Options{RepoURL: url, SHA: sha, Dir: dir, Log: log.add, MirrorRoot: root}); err != nil {
			t.Fatalf("checkout %d: %v\n%s", i, err, log.String())
		}
		if !strings.Contains(log.String(), want) {
			t.Fatalf("checkout %d log lacks %q:\n%s", i, want, log.String())
		}
		if i == 1 && strings.Contains(log.String(), "fetch") {
			t.Fatalf("warm checkout fetched:\n%s", log.String())
		}
		if got := agenttest.Git(t, dir, "remote", "get-url", "origin"); got != url {
			t.Fatalf("origin url %q, want %q", got, url)
		}
		if got := agenttest.Git(t, dir, "config", "remote.origin.fetch"); got != "+refs/heads/*:refs/remotes/origin/*" {
			t.Fatalf("origin fetch refspec %q", got)
		}
		agenttest.Git(t, dir, "fetch", "-q", "origin")
		if got := agenttest.Git(t, dir, "rev-parse", "origin/main"); got != sha {
			t.Fatalf("origin/main after fetch = %s, want %s", got, sha)
		}
	}
}
