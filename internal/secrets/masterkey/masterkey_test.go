package masterkey

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDataDirKeyIsCreatedOnceWithMode0600(t *testing.T) {
	dir := t.TempDir()
	k1, err := Load(dir, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %04o, want 0600", fi.Mode().Perm())
	}
	sealed, err := k1.Seal([]byte("hello"), []byte("purpose"))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := Load(dir, env(nil)) // a restart reads the same key
	if err != nil {
		t.Fatal(err)
	}
	if k2.Source() != SourceDataDir {
		t.Fatalf("source %q", k2.Source())
	}
	pt, err := k2.Open(sealed, []byte("purpose"))
	if err != nil || string(pt) != "hello" {
		t.Fatalf("open after reload: %q %v", pt, err)
	}
}

func TestLooseKeyFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir, env(nil)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, env(nil)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("want refusal, got %v", err)
	}
}

func TestEnvAndFileSources(t *testing.T) {
	raw := bytes.Repeat([]byte{7}, Size)
	hexKey := hex.EncodeToString(raw)
	kEnv, err := Load("", env(map[string]string{"KICI_SECRET_KEY": hexKey}))
	if err != nil || kEnv.Source() != SourceEnv {
		t.Fatalf("env: %v %v", kEnv, err)
	}
	p := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(p, []byte(hexKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kFile, err := Load("", env(map[string]string{"KICI_SECRET_KEY_FILE": p}))
	if err != nil || kFile.Source() != SourceFile {
		t.Fatalf("file: %v %v", kFile, err)
	}
	sealed, _ := kEnv.Seal([]byte("x"), []byte("a"))
	if pt, err := kFile.Open(sealed, []byte("a")); err != nil || string(pt) != "x" {
		t.Fatalf("same key from env and file must interoperate: %v", err)
	}
	if _, err := Load("", env(map[string]string{"KICI_SECRET_KEY": "short"})); err == nil || !strings.Contains(err.Error(), "KICI_SECRET_KEY") {
		t.Fatalf("bad key accepted: %v", err)
	}
}

func TestOpenRejectsWrongAADWrongKeyAndTampering(t *testing.T) {
	k1, _ := New(bytes.Repeat([]byte{1}, Size))
	k2, _ := New(bytes.Repeat([]byte{2}, Size))
	sealed, err := k1.Seal([]byte("private"), []byte("orchestrator-signing-key"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("private")) {
		t.Fatal("plaintext visible in sealed value")
	}
	if _, err := k1.Open(sealed, []byte("other-purpose")); !errors.Is(err, ErrOpen) {
		t.Fatalf("wrong aad: %v", err)
	}
	if _, err := k2.Open(sealed, []byte("orchestrator-signing-key")); !errors.Is(err, ErrOpen) {
		t.Fatalf("wrong key: %v", err)
	}
	bad := append([]byte{}, sealed...)
	bad[len(bad)-1] ^= 1
	if _, err := k1.Open(bad, []byte("orchestrator-signing-key")); !errors.Is(err, ErrOpen) {
		t.Fatalf("tampered: %v", err)
	}
	if _, err := k1.Open([]byte("v1"), nil); !errors.Is(err, ErrOpen) {
		t.Fatalf("short: %v", err)
	}
}
