// Package scripts tests the repository's shell scripts.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stubTools writes fake dpkg-query, apt-get and id into a directory that is
// put first on PATH: dpkg-query reports the packages named in installed,
// apt-get appends its arguments to a log, id -u prints uid.
func stubTools(t *testing.T, installed []string, uid string) (pathEnv, aptLog string) {
	t.Helper()
	dir := t.TempDir()
	aptLog = filepath.Join(dir, "apt.log")
	stubs := map[string]string{
		"dpkg-query": "#!/bin/sh\nfor p in " + strings.Join(installed, " ") + "; do [ \"$p\" = \"$3\" ] && { printf 'install ok installed'; exit 0; }; done\necho \"dpkg-query: no packages found matching $3\" >&2\nexit 1\n",
		"apt-get":    "#!/bin/sh\necho \"$*\" >> " + aptLog + "\n",
		"id":         "#!/bin/sh\necho " + uid + "\n",
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + dir + ":" + os.Getenv("PATH"), aptLog
}

// listedPackages reads the PACKAGES list of test-deps.sh.
func listedPackages(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("test-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\nPACKAGES=(\n")
	list, _, ok2 := strings.Cut(rest, "\n)\n")
	if !ok || !ok2 {
		t.Fatal("test-deps.sh has no PACKAGES=( … ) list")
	}
	var pkgs []string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			pkgs = append(pkgs, f[0])
		}
	}
	return pkgs
}

// except returns pkgs without drop.
func except(pkgs []string, drop ...string) []string {
	var out []string
	for _, p := range pkgs {
		if !slices.Contains(drop, p) {
			out = append(out, p)
		}
	}
	return out
}

func runDeps(t *testing.T, pathEnv string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "test-deps.sh")
	cmd.Env = append(os.Environ(), pathEnv)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func aptCalls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestTestDepsInstallsMissingAsRoot: as root, one apt-get update, then one
// install of exactly the missing packages.
func TestTestDepsInstallsMissingAsRoot(t *testing.T) {
	all := listedPackages(t)
	for _, p := range []string{"postgresql-15", "busybox-static", "git"} {
		if !slices.Contains(all, p) {
			t.Fatalf("test-deps.sh does not list %s", p)
		}
	}
	pathEnv, log := stubTools(t, except(all, "busybox-static"), "0")
	if out, err := runDeps(t, pathEnv); err != nil {
		t.Fatalf("test-deps.sh: %v\n%s", err, out)
	}
	got := aptCalls(t, log)
	want := []string{"update", "install -y busybox-static"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("apt-get calls %q, want %q", got, want)
	}
}

// TestTestDepsIdempotent: with everything installed nothing is run, as root
// or not.
func TestTestDepsIdempotent(t *testing.T) {
	for _, uid := range []string{"0", "1000"} {
		pathEnv, log := stubTools(t, listedPackages(t), uid)
		if out, err := runDeps(t, pathEnv); err != nil {
			t.Fatalf("uid %s: %v\n%s", uid, err, out)
		}
		if got := aptCalls(t, log); got != nil {
			t.Fatalf("uid %s: apt-get ran %q with nothing missing", uid, got)
		}
	}
}

// TestTestDepsNotRootStops: another user gets a failure naming the exact
// command, and nothing is installed.
func TestTestDepsNotRootStops(t *testing.T) {
	pathEnv, log := stubTools(t, except(listedPackages(t), "postgresql-15", "busybox-static"), "1000")
	out, err := runDeps(t, pathEnv)
	if err == nil {
		t.Fatalf("test-deps.sh succeeded as a user with packages missing:\n%s", out)
	}
	if want := "apt-get update && apt-get install -y postgresql-15 busybox-static"; !strings.Contains(out, want) {
		t.Fatalf("output does not name %q:\n%s", want, out)
	}
	if got := aptCalls(t, log); got != nil {
		t.Fatalf("apt-get ran %q as a user", got)
	}
}

// TestMakeTestRunsDepsFirst: the README's command provisions before it
// tests, and CI does nothing but call it.
func TestMakeTestRunsDepsFirst(t *testing.T) {
	out, err := exec.Command("make", "-s", "--no-print-directory", "-C", "..", "-n", "test").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.Contains(lines[0], "scripts/test-deps.sh") {
		t.Fatalf("make test does not start with scripts/test-deps.sh:\n%s", out)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ci), "apt-get") {
		t.Fatal(".ci/run installs packages itself; make test must do it")
	}
}

// TestGolangciLintCachedSkipsInstall: with the release already in the
// cache, golangci-lint.sh installs nothing (go is never run), reports the
// cached binary's version and prints its path.
func TestGolangciLintCachedSkipsInstall(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, "golangci-lint-v9.9.9", "golangci-lint")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 9.9.9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stubs := t.TempDir()
	if err := os.WriteFile(filepath.Join(stubs, "go"), []byte("#!/bin/sh\necho \"go $*\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "golangci-lint.sh")
	cmd.Env = append(os.Environ(), "KICI_TEST_CACHE="+cache, "GOLANGCI_LINT_VERSION=v9.9.9", "PATH="+stubs+":"+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("golangci-lint.sh: %v\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(string(out)); got != bin {
		t.Fatalf("printed %q, want the cached binary %q", got, bin)
	}
	if strings.Contains(stderr.String(), "installing") || strings.Contains(stderr.String(), "go ") || !strings.Contains(stderr.String(), "9.9.9") {
		t.Fatalf("stderr should only report the cached version 9.9.9:\n%s", stderr.String())
	}
}
