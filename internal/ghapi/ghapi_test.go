package ghapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"kici.dev/kici/internal/testutil/ghfake"
)

func TestAppClientAgainstFake(t *testing.T) {
	f := ghfake.New(5)
	defer f.Close()
	ctx := context.Background()
	c, err := NewAppClient(f.URL, 5, f.PrivateKeyPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.App(ctx)
	if err != nil || info.ID != 5 || info.Slug == "" {
		t.Fatalf("App = %+v, %v", info, err)
	}
	wrong, _ := NewAppClient(f.URL, 6, f.PrivateKeyPEM, nil)
	if _, err := wrong.App(ctx); err == nil {
		t.Fatal("a JWT for another App id was accepted")
	}
	if _, err := NewAppClient(f.URL, 5, "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----\n", nil); err == nil {
		t.Fatal("a bad key was accepted")
	}

	f.SetFile("o/r", "abc", ".kici/kici.lock.json", []byte(`{"x":1}`))
	b, err := c.GetFile(ctx, 9, "o/r", ".kici/kici.lock.json", "abc", 100)
	if err != nil || string(b) != `{"x":1}` {
		t.Fatalf("GetFile = %q, %v", b, err)
	}
	if _, err := c.GetFile(ctx, 9, "o/r", ".kici/kici.lock.json", "abc", 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("cap: %v", err)
	}
	if _, err := c.GetFile(ctx, 9, "o/r", ".kici/kici.lock.json", "zzz", 100); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := c.GetFile(ctx, 0, "o/r", ".kici/kici.lock.json", "abc", 100); err == nil {
		t.Fatal("an App call without installation id went through")
	}
	if f.Calls("POST /app/installations/9/access_tokens") != 1 {
		t.Fatalf("installation tokens minted %d times, want 1 (cached)", f.Calls("POST /app/installations/9/access_tokens"))
	}
	var files []string
	for i := 0; i < 150; i++ {
		files = append(files, fmt.Sprintf("f%03d", i))
	}
	f.SetCompare("o/r", "a", "b", files)
	f.SetPullFiles("o/r", 7, files[:3])
	got, err := c.CompareFiles(ctx, 9, "o/r", "a", "b")
	if err != nil || len(got) != 150 || got[149] != "f149" {
		t.Fatalf("CompareFiles: %d files, %v (want 150 over two pages)", len(got), err)
	}
	got, err = c.PullFiles(ctx, 9, "o/r", 7)
	if err != nil || len(got) != 3 {
		t.Fatalf("PullFiles: %v %v", got, err)
	}
	f.SetPermission("o/r", "w", "write")
	f.SetPermission("o/r", "m", "maintain")
	for user, want := range map[string]string{"w": "write", "m": "maintain", "stranger": "none"} {
		p, err := c.Permission(ctx, 9, "o/r", user)
		if err != nil || p != want {
			t.Fatalf("Permission(%s) = %q %v, want %q", user, p, err, want)
		}
	}
	if !CanWrite("maintain") || CanWrite("triage") || CanWrite("none") {
		t.Fatal("CanWrite")
	}
	for _, bad := range []string{"o", "o/r/x", "../r", "o/..", "/r"} {
		if _, err := c.GetFile(ctx, 9, bad, "x", "abc", 10); err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("repo %q accepted: %v", bad, err)
		}
	}
}

func TestTokenClient(t *testing.T) {
	f := ghfake.New(5)
	defer f.Close()
	f.Token = "ghp_secret"
	f.SetFile("o/r", "main", ".kici/kici.lock.json", []byte(`{}`))
	ctx := context.Background()
	if b, err := NewTokenClient(f.URL, "ghp_secret", nil).GetFile(ctx, 0, "o/r", ".kici/kici.lock.json", "main", 10); err != nil || string(b) != "{}" {
		t.Fatalf("token client: %q %v", b, err)
	}
	if _, err := NewTokenClient(f.URL, "wrong", nil).GetFile(ctx, 0, "o/r", ".kici/kici.lock.json", "main", 10); err == nil {
		t.Fatal("a wrong token was accepted")
	}
}
