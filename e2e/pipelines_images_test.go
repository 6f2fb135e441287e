package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// corpusImages builds the Docker images pipelines name in expect.yaml's
// dockerImages, by tag. No registry is reachable: each is built FROM
// scratch out of Debian packages installed on this host
// (scripts/test-deps.sh).
var corpusImages = map[string]func(t *testing.T, tag string){
	// Redis 7 from Debian's redis-server and redis-tools, with a static
	// busybox for sh: the service and the job container of the
	// redis-service pipeline.
	"kici-corpus-redis:7": func(t *testing.T, tag string) {
		buildScratchImage(t, tag, []string{"/usr/bin/redis-server", "/usr/bin/redis-cli"},
			[]string{"sh", "echo", "cat", "test", "[", "grep", "seq", "env", "pwd", "ls"})
	},
}

// sharedLib matches a library path in ldd's output ("libc.so.6 =>
// /lib/x86_64-linux-gnu/libc.so.6 (0x…)" and the loader's own line).
var sharedLib = regexp.MustCompile(`(?m)(?:=>\s+)?(/\S+)\s+\(0x`)

// buildScratchImage builds tag FROM scratch with the programs (and the
// shared libraries ldd names for them) at their host paths, /bin/busybox
// with the applets linked in /bin, and a world-writable /tmp. It removes
// the image when the test ends.
func buildScratchImage(t *testing.T, tag string, programs, applets []string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	files := map[string]bool{"/bin/busybox": true}
	for _, p := range programs {
		files[p] = true
		out, err := exec.Command("ldd", p).CombinedOutput()
		if err != nil {
			t.Fatalf("ldd %s: %v\n%s (install the Debian packages of scripts/test-deps.sh)", p, err, out)
		}
		for _, m := range sharedLib.FindAllStringSubmatch(string(out), -1) {
			files[m[1]] = true
		}
	}
	for f := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-L", f, filepath.Join(root, f)).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", f, err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil || os.Chmod(filepath.Join(root, "tmp"), 0o1777) != nil {
		t.Fatalf("rootfs /tmp: %v", err)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "Dockerfile"), "FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin:/usr/bin\n")
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", tag).Run() })
}

// buildCorpusImages builds the images a pipeline names. Images that jobs
// built from a Dockerfile (`container: {build: …}`, tagged by content) are
// removed before and after, so each test run builds them afresh. Those
// tags and that removal are shared by every process on the host, so the
// test holds the host's corpus-image lock until its end (make test runs
// the e2e package as several processes: scripts/e2eshard).
func buildCorpusImages(t *testing.T, tags []string) {
	t.Helper()
	lockCorpusImages(t)
	removeJobBuiltImages()
	t.Cleanup(removeJobBuiltImages)
	for _, tag := range tags {
		build, ok := corpusImages[tag]
		if !ok {
			t.Fatalf("no builder for image %q (known: %s)", tag, strings.Join(slicesSortedKeys(corpusImages), ", "))
		}
		build(t, tag)
	}
}

// lockCorpusImages takes an exclusive flock on a file in the host's temp
// directory, released when the test and its cleanups end (it is registered
// first, so it runs last).
func lockCorpusImages(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "kici-e2e-corpus-images.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// removeJobBuiltImages removes the images agents built for job containers
// (label kici-build-hash).
func removeJobBuiltImages() {
	out, err := exec.Command("docker", "image", "ls", "-q", "--filter", "label=kici-build-hash").Output()
	if err != nil || len(strings.Fields(string(out))) == 0 {
		return
	}
	_ = exec.Command("docker", append([]string{"image", "rm", "-f"}, strings.Fields(string(out))...)...).Run()
}
