package lockfetch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

const goodLock = `{"schemaVersion":29,"source":{"file":"x","export":"#default"},"contentHash":"x","workflows":[]}`

func TestCacheOutcomesAndKeys(t *testing.T) {
	c := New(2, 100)
	ctx := context.Background()
	var calls atomic.Int32
	fetch := func(body string, err error) Fetch {
		return func(ctx context.Context, max int64) ([]byte, error) {
			calls.Add(1)
			if max != 100 {
				t.Errorf("fetch got cap %d, want 100", max)
			}
			return []byte(body), err
		}
	}
	sha := strings.Repeat("a", 40)
	cases := []struct {
		name, body string
		err        error
		status     Status
	}{
		{"ok", goodLock, nil, StatusOK},
		{"missing", "", ErrMissing, StatusMissing},
		{"corrupt", `{"schemaVersion":`, nil, StatusCorrupt},
		{"schema", `{"schemaVersion":3,"workflows":[]}`, nil, StatusCorrupt},
		{"too large by size", strings.Repeat(" ", 101), nil, StatusTooLarge},
		{"too large by fetcher", "", ErrTooLarge, StatusTooLarge},
	}
	for _, cs := range cases {
		res, err := c.Get(ctx, "github", "o/"+cs.name, sha, fetch(cs.body, cs.err))
		if err != nil || res.Status != cs.status || res.Cached {
			t.Fatalf("%s: %+v %v, want %s", cs.name, res, err, cs.status)
		}
		if cs.status != StatusOK && res.Detail == "" {
			t.Fatalf("%s: no detail", cs.name)
		}
	}
	// Transient errors are returned and not cached.
	boom := errors.New("connection reset")
	if _, err := c.Get(ctx, "github", "o/t", sha, fetch("", boom)); !errors.Is(err, boom) {
		t.Fatalf("transient: %v", err)
	}
	if _, err := c.Get(ctx, "github", "o/t", sha, fetch(goodLock, nil)); err != nil {
		t.Fatal(err)
	}
	// LRU of 2: the last two keys are cached, keyed by provider too.
	n := calls.Load()
	r, _ := c.Get(ctx, "github", "o/t", sha, fetch(goodLock, nil))
	if !r.Cached || calls.Load() != n {
		t.Fatal("recent entry not served from cache")
	}
	if r, _ := c.Get(ctx, "gitea", "o/t", sha, fetch(goodLock, nil)); r.Cached {
		t.Fatal("another provider's entry was served")
	}
	if c.Len() != 2 {
		t.Fatalf("cache len %d, want 2 (LRU cap)", c.Len())
	}
	// Branch refs expire; SHAs do not.
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	if _, err := c.Get(ctx, "github", "o/b", "main", fetch(goodLock, nil)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(DefaultRefTTL + time.Second)
	if r, _ := c.Get(ctx, "github", "o/b", "main", fetch(goodLock, nil)); r.Cached {
		t.Fatal("branch entry served after its TTL")
	}
}

// TestCacheKeepsNoFailures: a corrupt, missing or too-large outcome for a
// SHA is not cached, so the next event for that commit fetches again and
// gets the lock once the forge serves it whole.
func TestCacheKeepsNoFailures(t *testing.T) {
	c := New(0, 100)
	ctx := context.Background()
	sha := strings.Repeat("c", 40)
	for _, bad := range []struct {
		body string
		err  error
	}{{`<html>502 Bad Gateway</html>`, nil}, {`{"schemaVersion":29,"work`, nil}, {"", ErrMissing}, {"", ErrTooLarge}} {
		var calls atomic.Int32
		first, err := c.Get(ctx, "github", "o/r", sha, func(context.Context, int64) ([]byte, error) {
			calls.Add(1)
			return []byte(bad.body), bad.err
		})
		if err != nil || first.Status == StatusOK {
			t.Fatalf("%q %v: %+v %v, want a failure", bad.body, bad.err, first, err)
		}
		again, err := c.Get(ctx, "github", "o/r", sha, func(context.Context, int64) ([]byte, error) {
			calls.Add(1)
			return []byte(goodLock), nil
		})
		if err != nil || again.Status != StatusOK || again.Cached || calls.Load() != 2 {
			t.Fatalf("after a %s outcome: %+v %v (%d fetches), want a fresh ok", first.Status, again, err, calls.Load())
		}
		c = New(0, 100)
	}
}

func TestCacheConcurrentFetchOnce(t *testing.T) {
	c := New(0, 0)
	var calls atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Get(context.Background(), "github", "o/r", strings.Repeat("b", 40), func(ctx context.Context, _ int64) ([]byte, error) {
				calls.Add(1)
				wait.Elapse(ctx, 50*time.Millisecond) // a slow fetch, long enough for the other callers to join it
				return []byte(goodLock), nil
			})
			if err != nil || res.Status != StatusOK {
				t.Errorf("%+v %v", res, err)
			}
		}()
	}
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("50 concurrent gets fetched %d times, want 1", calls.Load())
	}
}

func TestCachePanickingFetchIsCorrupt(t *testing.T) {
	c := New(0, 0)
	res, err := c.Get(context.Background(), "x", "o/r", "main", func(context.Context, int64) ([]byte, error) { panic("boom") })
	if err != nil || res.Status != StatusCorrupt {
		t.Fatalf("%+v %v", res, err)
	}
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// FetchGitLock against a real repository over file://: by SHA, branch and
// HEAD; missing file and ref; the cap checked before the blob is read.
func TestFetchGitLock(t *testing.T) {
	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "main")
	if err := os.MkdirAll(filepath.Join(work, ".kici"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, work, "add", "-A")
	gitRun(t, work, "commit", "-qm", "no lock")
	noLock := gitRun(t, work, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, ".kici/kici.lock.json"), []byte(goodLock), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "big.bin"), []byte(strings.Repeat("z", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, work, "add", "-A")
	gitRun(t, work, "commit", "-qm", "lock")
	withLock := gitRun(t, work, "rev-parse", "HEAD")
	bare := filepath.Join(t.TempDir(), "repo.git")
	gitRun(t, work, "clone", "-q", "--bare", work, bare)
	gitRun(t, bare, "config", "uploadpack.allowFilter", "true")
	gitRun(t, bare, "config", "uploadpack.allowAnySHA1InWant", "true")
	url := "file://" + bare
	ctx := context.Background()
	for _, ref := range []string{withLock, "main", "HEAD"} {
		b, err := FetchGitLock(ctx, url, ref, 1000, nil)
		if err != nil || string(b) != goodLock {
			t.Fatalf("ref %s: %q %v", ref, b, err)
		}
	}
	if _, err := FetchGitLock(ctx, url, noLock, 1000, nil); !errors.Is(err, ErrMissing) {
		t.Fatalf("commit without lock: %v, want ErrMissing", err)
	}
	if _, err := FetchGitLock(ctx, url, "no-such-branch", 1000, nil); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing branch: %v, want ErrMissing", err)
	}
	if _, err := FetchGitLock(ctx, url, "main", 10, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("cap 10: %v, want ErrTooLarge", err)
	}
	for _, bad := range []string{"--upload-pack=touch /tmp/x", "a b", ""} {
		if _, err := FetchGitLock(ctx, url, bad, 1000, nil); err == nil || errors.Is(err, ErrMissing) {
			t.Fatalf("ref %q accepted: %v", bad, err)
		}
	}
	if _, err := FetchGitLock(ctx, "ext::sh -c touch% /tmp/pwned", "main", 1000, nil); err == nil {
		t.Fatal("ext:: transport allowed")
	}
}

func TestRepoURL(t *testing.T) {
	u, err := RepoURL("https://git.example.com/{owner}/{name}.git?r={repo}", "acme/api")
	if err != nil || u != "https://git.example.com/acme/api.git?r=acme/api" {
		t.Fatalf("%q %v", u, err)
	}
	if u, err := RepoURL("https://gitlab.example.com/{repo}.git", "group/sub/proj"); err != nil || u != "https://gitlab.example.com/group/sub/proj.git" {
		t.Fatalf("nested group: %q %v", u, err)
	}
	for _, bad := range []string{"acme", "acme/../x", "acme/.git", "-x/y", "a/b c", "a/b?x=1", "a//b", "a/b@evil"} {
		if _, err := RepoURL("https://h/{repo}", bad); !errors.Is(err, ErrBadRepo) {
			t.Fatalf("%q accepted", bad)
		}
	}
}
