package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildInto builds the named commands into dir.
func buildInto(t *testing.T, dir string, pkgs ...string) {
	t.Helper()
	args := append([]string{"build", "-o", dir + "/"}, pkgs...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// runAdmin runs kici-admin from dir with only PATH=path in its environment
// plus env, and returns its exit code and stderr.
func runAdmin(t *testing.T, dir, path string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "kici-admin"), args...)
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + t.TempDir()}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kici-admin: %v", err)
	}
	return code, stderr.String()
}

// A direct-mode command line (flag or KICI_DATABASE_URL) with no
// kici-orchestrator next to kici-admin or on PATH fails naming the binary to
// install; with one next to it, the command runs there: the answer is the
// orchestrator's direct mode opening the database (which does not exist).
func TestDirectModeRunsInOrchestrator(t *testing.T) {
	alone, both := t.TempDir(), t.TempDir()
	buildInto(t, alone, "kici.dev/kici/cmd/kici-admin")
	buildInto(t, both, "kici.dev/kici/cmd/kici-admin", "kici.dev/kici/cmd/kici-orchestrator")
	missing := filepath.Join(t.TempDir(), "kici.db")
	emptyPath := t.TempDir()

	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"context", "list", "--org", "acme", "--database-url", "sqlite://" + missing}},
		{"env", []string{"KICI_DATABASE_URL=sqlite://" + missing}, []string{"context", "list", "--org", "acme"}},
	} {
		code, stderr := runAdmin(t, alone, emptyPath, tc.env, tc.args...)
		if code == 0 || !strings.Contains(stderr, "install kici-orchestrator") {
			t.Errorf("%s, no kici-orchestrator: exit %d, stderr %q", tc.name, code, stderr)
		}
		code, stderr = runAdmin(t, both, emptyPath, tc.env, tc.args...)
		if code != 1 || !strings.Contains(stderr, "sqlite: no database at "+missing) {
			t.Errorf("%s, kici-orchestrator beside kici-admin: exit %d, stderr %q", tc.name, code, stderr)
		}
	}

	// Found on PATH when not beside kici-admin.
	code, stderr := runAdmin(t, alone, both, []string{"KICI_DATABASE_URL=sqlite://" + missing}, "context", "list", "--org", "acme")
	if code != 1 || !strings.Contains(stderr, "sqlite: no database at "+missing) {
		t.Errorf("kici-orchestrator on PATH: exit %d, stderr %q", code, stderr)
	}
}
