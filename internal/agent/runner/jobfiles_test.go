package runner

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"kici.dev/kici/internal/agent/transfer"
)

// TestMain lets this test binary be the agent binary a transfer child is
// re-executed from (Options.AgentBinary).
func TestMain(m *testing.M) {
	Supervise(os.Args[1:])
	os.Exit(m.Run())
}

// searchableDir is a fresh directory other users can traverse (t.TempDir's
// parent is private), removed at cleanup.
func searchableDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kici-runner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	return d
}

// childBinary copies the test binary where another user can execute it.
func childBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := searchableDir(t)
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "agent")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// On a root agent, packing and unpacking run as the step user, not as
// root: a restore into a directory only root may write writes nothing, a
// save of a file only root may read reads nothing, and what is restored
// into the job's own directory belongs to the step user.
func TestTransferRunsAsTheStepUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent switches to the step user only as root")
	}
	const nobody = 65534
	host := searchableDir(t)
	rootOnly := filepath.Join(host, "cron.d")
	jobDir := filepath.Join(host, "job")
	for _, d := range []string{rootOnly, jobDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(jobDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	u := &StepUser{UID: nobody, GID: nobody}
	j := &job{r: &Runner{opts: Options{StepUser: u, AgentBinary: childBinary(t)}}, ctx: context.Background(), ident: Identity{User: u}}

	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "evil"), []byte("* * * * * root id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := transfer.Pack(&archive, []transfer.Root{{Dir: src}}); err != nil {
		t.Fatal(err)
	}

	_, _, err := j.unpackAs(context.Background(), bytes.NewReader(archive.Bytes()), []transfer.Root{{Dir: rootOnly, Base: rootOnly}})
	if err == nil || !strings.Contains(err.Error(), rootOnly) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("unpack into a root-only directory: %v", err)
	}
	if ents, _ := os.ReadDir(rootOnly); len(ents) != 0 {
		t.Fatalf("the restore wrote into the root-only directory: %v", ents)
	}

	st, _, err := j.unpackAs(context.Background(), bytes.NewReader(archive.Bytes()), []transfer.Root{{Dir: filepath.Join(jobDir, ".deps"), Base: jobDir}})
	if err != nil || st.Files != 1 {
		t.Fatalf("unpack into the job's directory: %+v, %v", st, err)
	}
	fi, err := os.Stat(filepath.Join(jobDir, ".deps", "evil"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobody {
		t.Fatalf("restored file: %v, %v", fi, err)
	}

	secret := filepath.Join(jobDir, "secret.key")
	if err := os.WriteFile(secret, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := j.packAs(context.Background(), io.Discard, []transfer.Root{{Dir: jobDir, Base: jobDir}}); err == nil || !strings.Contains(err.Error(), "secret.key: permission denied") {
		t.Fatalf("pack of a root-only file: %v", err)
	}
}

// A root agent whose binary lies where the step user cannot search (a
// private directory: here the test binary's own build directory) still
// packs and unpacks as that user: the child reaches the running binary
// through /proc/self/exe, not by its path.
func TestTransferAsTheStepUserFromAPrivateDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent switches to the step user only as root")
	}
	const nobody = 65534
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	private := false
	for d := filepath.Dir(self); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			private = true
		}
	}
	if !private {
		t.Fatalf("the test binary %s is reachable by every user: the case is not set up", self)
	}
	if got := execPathAs(self); got != selfExe {
		t.Fatalf("execPathAs(own binary) = %q, want %q", got, selfExe)
	}
	if got := execPathAs("/bin/sh"); got != "/bin/sh" {
		t.Fatalf("execPathAs(another binary) = %q", got)
	}
	jobDir := filepath.Join(searchableDir(t), "job")
	if err := os.Mkdir(jobDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(jobDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	u := &StepUser{UID: nobody, GID: nobody}
	j := &job{r: &Runner{opts: Options{StepUser: u, AgentBinary: self}}, ctx: context.Background(), ident: Identity{User: u}}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "dep"), []byte("cached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := transfer.Pack(&archive, []transfer.Root{{Dir: src}}); err != nil {
		t.Fatal(err)
	}
	st, _, err := j.unpackAs(context.Background(), bytes.NewReader(archive.Bytes()), []transfer.Root{{Dir: filepath.Join(jobDir, ".deps"), Base: jobDir}})
	if err != nil || st.Files != 1 {
		t.Fatalf("unpack as the step user with the agent binary in a private directory: %+v, %v", st, err)
	}
	if _, err := j.packAs(context.Background(), io.Discard, []transfer.Root{{Dir: jobDir, Base: jobDir}}); err != nil {
		t.Fatalf("pack as the step user with the agent binary in a private directory: %v", err)
	}
}
