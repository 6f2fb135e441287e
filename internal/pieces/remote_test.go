package pieces

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRefResolverSeesAMovedTag: ls-remote resolves a tag (annotated tags
// peeled) and a branch; a moved tag is seen once the cached answer is
// older than TTL, not before; an unreachable library is an error, and
// the default transports refuse a file:// library.
func TestRefResolverSeesAMovedTag(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "one")
	c1 := git("rev-parse", "HEAD")
	git("tag", "-a", "-m", "v1", "v1")
	now := time.Unix(1_000_000, 0)
	r := &RefResolver{Protocols: "file", TTL: time.Minute, Now: func() time.Time { return now }}
	url := "file://" + repo
	ctx := context.Background()
	if got, err := r.Resolve(ctx, url, "v1"); err != nil || got != c1 {
		t.Fatalf("v1 = %q, %v; want %s (the tag peeled to its commit)", got, err, c1)
	}
	git("commit", "-q", "--allow-empty", "-m", "two")
	c2 := git("rev-parse", "HEAD")
	git("tag", "-f", "-a", "-m", "v1 again", "v1")
	if got, _ := r.Resolve(ctx, url, "v1"); got != c1 {
		t.Errorf("within the TTL: %s, want the cached %s", got, c1)
	}
	now = now.Add(2 * time.Minute)
	if got, err := r.Resolve(ctx, url, "v1"); err != nil || got != c2 {
		t.Errorf("after the TTL: %q, %v; want the moved tag's %s", got, err, c2)
	}
	if got, err := r.Resolve(ctx, url, "main"); err != nil || got != c2 {
		t.Errorf("branch main = %q, %v", got, err)
	}
	if got, err := r.Resolve(ctx, url, c1); err != nil || got != c1 {
		t.Errorf("a full commit id resolves to itself: %q, %v", got, err)
	}
	if _, err := r.Resolve(ctx, url, "v9"); err == nil || !strings.Contains(err.Error(), "v9 not found") {
		t.Errorf("missing ref: %v", err)
	}
	if _, err := r.Resolve(ctx, "file://"+repo+"-gone", "v1"); err == nil {
		t.Error("an unreachable library resolved")
	}
	if _, err := (&RefResolver{}).Resolve(ctx, url, "v1"); err == nil {
		t.Error("the default transports (https only) reached a file:// library")
	}
}
