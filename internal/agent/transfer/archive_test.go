package transfer

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestPackUnpackRoundTrip(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a/b/f.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/python3", filepath.Join(src, "link")); err != nil { // a virtualenv's bin/python
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := Pack(&buf, []Root{{Dir: src}, {Dir: filepath.Join(src, "missing")}})
	if err != nil || st.Files != 3 || st.Skipped != 0 {
		t.Fatalf("pack: %+v %v", st, err)
	}
	dst := filepath.Join(t.TempDir(), "new", "root")
	st, created, err := Unpack(&buf, []Root{{Dir: dst}, {Dir: t.TempDir()}})
	if err != nil || st.Files != 3 {
		t.Fatalf("unpack: %+v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a/b/f.txt")); string(b) != "hello" {
		t.Errorf("content = %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "run.sh")); fi == nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("executable bit lost: %v", fi)
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "/usr/bin/python3" {
		t.Errorf("the link was not restored as a link: %q, %v", target, err)
	}
	Undo(created)
	if _, err := os.Stat(filepath.Dir(dst)); !os.IsNotExist(err) {
		t.Errorf("Undo left %s: %v", filepath.Dir(dst), err)
	}
}

// rawArchive builds a zstd tar with the given entry names.
func rawArchive(t *testing.T, names ...string) *bytes.Buffer {
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	return &buf
}

func TestUnpackRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	for _, name := range []string{"0/../escape", "0//abs", "/0/x", "1/x", "x", "-1/x", "00/x", "0/a/../../x"} {
		root := t.TempDir()
		_, created, err := Unpack(rawArchive(t, name), []Root{{Dir: root}})
		if err == nil {
			t.Errorf("entry %q accepted", name)
		}
		Undo(created)
	}
	// An existing symlink in the root (a committed one) is never written
	// through.
	root := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Unpack(rawArchive(t, "0/link/pwned"), []Root{{Dir: root}}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("write through a symlinked dir: %v", err)
	}
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(root, "flink")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Unpack(rawArchive(t, "0/flink"), []Root{{Dir: root}}); err == nil {
		t.Error("write through a symlinked file accepted")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("files written outside the root: %v", ents)
	}
	// A root that is itself a symlink is refused.
	if _, _, err := Unpack(rawArchive(t, "0/x"), []Root{{Dir: filepath.Join(root, "link")}}); err == nil {
		t.Error("symlinked root accepted")
	}
}

// An archive that plants a link and then writes through it (a directory
// entry, a file entry below it, or a file entry at the link's own name)
// writes nothing outside the root.
func TestUnpackNeverWritesThroughAPlantedLink(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name  string
		after tar.Header
	}{
		{"file below the link", tar.Header{Typeflag: tar.TypeReg, Name: "0/link/pwned", Mode: 0o644, Size: 1}},
		{"directory below the link", tar.Header{Typeflag: tar.TypeDir, Name: "0/link/sub/", Mode: 0o755}},
		{"file at the link", tar.Header{Typeflag: tar.TypeReg, Name: "0/flink", Mode: 0o644, Size: 1}},
	} {
		var buf bytes.Buffer
		zw, _ := zstd.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "0/link", Linkname: outside, Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "0/flink", Linkname: filepath.Join(outside, "f"), Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
		h := tc.after
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		tw.Close()
		zw.Close()
		if _, _, err := Unpack(&buf, []Root{{Dir: t.TempDir()}}); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("%s: written outside the root: %v", tc.name, ents)
		}
	}
}

func TestMatchFiles(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"out/a.bin", "out/sub/b.bin", "out/x.tmp", ".git/config", "src/c.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := MatchFiles(root, []string{"out/**", "!out/*.tmp", "**/config"})
	if err != nil || strings.Join(got, ",") != "out/a.bin,out/sub/b.bin" {
		t.Errorf("MatchFiles = %v, %v", got, err)
	}
}

// With Base set, neither Pack nor Unpack goes through a symbolic link
// between the job directory and the root: a link a step planted in the
// checkout (.deps -> /etc) cannot make a restore write, or a save read,
// outside the job.
func TestRootThroughSymlinkRefused(t *testing.T) {
	base, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(base, ".deps")); err != nil {
		t.Fatal(err)
	}
	root := Root{Dir: filepath.Join(base, ".deps", "pkg"), Base: base}
	var buf bytes.Buffer
	if _, err := Pack(&buf, []Root{{Dir: t.TempDir()}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Unpack(bytes.NewReader(buf.Bytes()), []Root{root}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("unpack through a link: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("unpack wrote outside the job: %v", ents)
	}
	if _, err := Pack(io.Discard, []Root{root}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("pack through a link: %v", err)
	}
	if err := CheckRoot(Root{Dir: "/etc", Base: base}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("root outside base: %v", err)
	}
}
