package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kici-admin signin check validates a sign-in file and shows the role an
// identity would get (exit 2 when refused); a bad file is an error.
func TestSignInCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "signin.yaml")
	if err := os.WriteFile(good, []byte(`providers:
  - {name: gitea, kind: gitea, url: "https://git.example.com", clientId: a, clientSecret: b}
roles:
  - {users: ["gitea:alice"], role: owner}
  - {groups: [acme/release], role: admin, routingKey: "generic:acme:x"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		var out bytes.Buffer
		code := Run(context.Background(), args, IO{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
		return out.String(), code
	}
	if out, code := run("signin", "check", good, "--as", "gitea:bob", "--group", "acme/release"); code != 0 || !strings.Contains(out, "gitea:bob: role admin, generic:acme:x") {
		t.Errorf("bob: %d %s", code, out)
	}
	if out, code := run("signin", "check", good, "--as", "gitea:carol"); code != 2 || !strings.Contains(out, "refused") {
		t.Errorf("carol: %d %s", code, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("roles:\n  - {users: [\"gitea:alice\"], role: root}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := run("signin", "check", bad); code != 1 || !strings.Contains(out, `role "root"`) {
		t.Errorf("bad file: %d %s", code, out)
	}
}
