package checkout

import (
	"context"
	"encoding/base64"
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

type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }
func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func TestCheckoutFileURLExactSHA(t *testing.T) {
	repo, first := agenttest.GitRepo(t, map[string]string{"a.txt": "one"})
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	agenttest.Git(t, repo, "commit", "-q", "-am", "second")
	second := agenttest.Git(t, repo, "rev-parse", "HEAD")

	for _, sha := range []string{first, second} {
		dir := filepath.Join(t.TempDir(), "src")
		var log logBuf
		if err := Run(context.Background(), Options{RepoURL: "file://" + repo, SHA: sha, Dir: dir, Log: log.add}); err != nil {
			t.Fatalf("checkout %s: %v\n%s", sha, err, log.String())
		}
		b, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
		want := map[string]string{first: "one", second: "two"}[sha]
		if string(b) != want {
			t.Errorf("a.txt at %s = %q, want %q", sha, b, want)
		}
		if !strings.Contains(log.String(), "HEAD is now at "+sha) {
			t.Errorf("log: %s", log.String())
		}
	}
}

func TestCheckoutBadSHA(t *testing.T) {
	repo, _ := agenttest.GitRepo(t, map[string]string{"a.txt": "one"})
	err := Run(context.Background(), Options{RepoURL: "file://" + repo, SHA: strings.Repeat("ab", 20), Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "git ") {
		t.Fatalf("missing commit: err = %v", err)
	}
	for _, sha := range []string{"HEAD", "--upload-pack=evil", "ABCDEF", ""} {
		if err := Run(context.Background(), Options{RepoURL: "file://" + repo, SHA: sha, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "invalid commit sha") {
			t.Errorf("sha %q: err = %v", sha, err)
		}
	}
}

func TestValidateRepoURL(t *testing.T) {
	ok := []string{"file:///srv/repo", "https://example.com/o/r.git", "http://127.0.0.1:8080/r"}
	bad := []string{"", "ext::sh -c touch% /tmp/pwned", "-uhttps://x", "ssh://host/r", "git@host:o/r", "/srv/repo",
		"fd::3", "https://", "file://remotehost/r", "https://x/r\n", "https://user:pass@example.com/r"}
	for _, u := range ok {
		if err := ValidateRepoURL(u); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
	for _, u := range bad {
		err := ValidateRepoURL(u)
		if err == nil {
			t.Errorf("%q accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "pass") {
			t.Errorf("%q: error leaks credentials: %v", u, err)
		}
	}
}

// TestCredentialsNeverPrinted sends basic auth to an HTTP server that
// records the header and refuses the request: the header must arrive, and
// neither the secret nor its encodings may appear in logs or the error.
func TestCredentialsNeverPrinted(t *testing.T) {
	const user, secret = "x-access-token", "s3cr3t-token-value"
	var mu sync.Mutex
	var gotAuth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "denied", http.StatusForbidden)
	}))
	defer srv.Close()
	var log logBuf
	err := Run(context.Background(), Options{
		RepoURL: srv.URL + "/o/r.git", SHA: strings.Repeat("0", 39) + "1", Dir: t.TempDir(),
		Auth: &protocol.SourceAuth{Kind: protocol.AuthBasic, User: user, Secret: secret}, Log: log.add,
	})
	if err == nil {
		t.Fatal("expected an error")
	}
	enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))
	text := err.Error() + "\n" + log.String()
	for _, s := range []string{secret, enc} {
		if strings.Contains(text, s) {
			t.Errorf("credential %q printed:\n%s", s, text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gotAuth) == 0 || gotAuth[0] != "Basic "+enc {
		t.Errorf("server saw Authorization %q", gotAuth)
	}
}

// TestDumbHTTPFallsBackToFullFetch serves a repository over git's dumb HTTP
// protocol, which cannot fetch a shallow commit by sha, so the full fetch
// fallback must be used.
func TestDumbHTTPFallsBackToFullFetch(t *testing.T) {
	repo, sha := agenttest.GitRepo(t, map[string]string{"a.txt": "dumb"})
	agenttest.Git(t, repo, "update-server-info")
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(repo, ".git"))))
	defer srv.Close()
	dir := t.TempDir()
	var log logBuf
	if err := Run(context.Background(), Options{RepoURL: srv.URL + "/", SHA: sha, Dir: dir, Log: log.add}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "fetching all branches") {
		t.Errorf("fallback not used:\n%s", log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "dumb" {
		t.Errorf("a.txt = %q", b)
	}
}
