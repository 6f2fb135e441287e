package agenttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitRepo creates a git repository in a new t.TempDir() with files (path →
// content) committed on branch main, and returns its directory and the
// commit sha. It uses the real git binary with an isolated configuration.
func GitRepo(t testing.TB, files map[string]string) (dir, sha string) {
	t.Helper()
	dir = t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "init", "-q", "-b", "main")
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "initial")
	return dir, Git(t, dir, "rev-parse", "HEAD")
}

// Git runs git in dir with an isolated configuration and a fixed identity
// and returns its trimmed stdout; it fails t on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=kici", "GIT_AUTHOR_EMAIL=kici@example.invalid",
		"GIT_COMMITTER_NAME=kici", "GIT_COMMITTER_EMAIL=kici@example.invalid",
	)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(string(out))
}
