package secrets

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

func testKey(t *testing.T, b byte) *masterkey.Key {
	t.Helper()
	k, err := masterkey.New(bytes.Repeat([]byte{b}, masterkey.Size))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// dbBytes is the SQLite database as it lies on disk (file and WAL).
func dbBytes(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(p)
		all = append(all, b...)
	}
	return all
}

// Webhook secrets written before encryption at rest (plaintext rows) are
// read as they are, then sealed in place at start; new ones are sealed on
// write; no secret is left in the database file; callers always see the
// plaintext. A rotation re-seals with the new key; a wrong key is an
// error and rewrites nothing.
func TestWebhookSecretsEncryptedAtRestAndMigratedInPlace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kici.db")
	raw, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	const legacy, legacyRot, fresh = "legacy-plaintext-secret-0001", "legacy-rotated-secret-0002", "fresh-secret-written-0003"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(raw.CreateSource(ctx, &store.Source{ID: "s1", OrgID: "acme", Name: "old", Provider: "generic", RoutingKey: "rk1",
		VerificationMethod: "hmac_sha256", WebhookSecret: legacy, Enabled: true}))
	must(raw.AddSourceSecret(ctx, &store.SourceSecret{ID: "sec1", SourceID: "s1", Secret: legacyRot}))

	ring := &masterkey.Ring{Current: testKey(t, 1)}
	st := SealSources(raw, ring)
	if src, err := st.GetSource(ctx, "s1"); err != nil || src.WebhookSecret != legacy {
		t.Fatalf("legacy plaintext row through the sealed view: %v %+v", err, src)
	}
	n, err := SealStoredSourceSecrets(ctx, raw, ring)
	if err != nil || n != 2 {
		t.Fatalf("first start: sealed %d rows, err %v; want 2", n, err)
	}
	if n, err := SealStoredSourceSecrets(ctx, raw, ring); err != nil || n != 0 {
		t.Fatalf("second start: rewrote %d rows, err %v; want 0", n, err)
	}
	must(st.CreateSourceWithSettings(ctx, &store.Source{ID: "s2", OrgID: "acme", Name: "new", Provider: "generic", RoutingKey: "rk2",
		VerificationMethod: "hmac_sha256", WebhookSecret: fresh, Enabled: true}, nil, []*store.SourceSecret{{ID: "sec2", Secret: fresh + "-x"}}))
	must(st.AddSourceSecret(ctx, &store.SourceSecret{SourceID: "s2", Secret: fresh + "-y"}))

	if src, _ := raw.GetSource(ctx, "s1"); !strings.HasPrefix(src.WebhookSecret, SealedPrefix) {
		t.Errorf("stored s1 secret %q, want sealed", src.WebhookSecret)
	}
	if src, _ := st.GetSource(ctx, "s2"); src.WebhookSecret != fresh {
		t.Errorf("s2 through the sealed view: %q", src.WebhookSecret)
	}
	secs, err := st.ListSourceSecrets(ctx, "s2", true)
	got := map[string]bool{}
	for _, sec := range secs {
		got[sec.Secret] = true
	}
	if err != nil || len(secs) != 2 || !got[fresh+"-x"] || !got[fresh+"-y"] {
		t.Fatalf("s2 secrets %v %v", err, got)
	}
	list, err := st.ListSources(ctx, "")
	if err != nil || len(list) != 2 || list[0].WebhookSecret != legacy {
		t.Fatalf("list: %v %+v", err, list)
	}
	on := dbBytes(t, path)
	for _, secret := range []string{legacy, legacyRot, fresh} {
		if bytes.Contains(on, []byte(secret)) {
			t.Errorf("database file holds %q in clear", secret)
		}
	}

	// A wrong key opens nothing and rewrites nothing.
	if _, err := SealStoredSourceSecrets(ctx, raw, &masterkey.Ring{Current: testKey(t, 9)}); err == nil {
		t.Fatal("a wrong master key was accepted")
	}
	if _, err := SealSources(raw, &masterkey.Ring{Current: testKey(t, 9)}).GetSource(ctx, "s1"); err == nil {
		t.Fatal("a wrong master key opened a webhook secret")
	}
	// Rotation: with the old key beside the new one every row is re-sealed
	// with the new key, which alone opens them afterwards.
	n, err = SealStoredSourceSecrets(ctx, raw, &masterkey.Ring{Current: testKey(t, 2), Old: testKey(t, 1)})
	if err != nil || n != 5 {
		t.Fatalf("rotation re-sealed %d rows, err %v; want 5", n, err)
	}
	newOnly := SealSources(raw, &masterkey.Ring{Current: testKey(t, 2)})
	if src, err := newOnly.GetSource(ctx, "s1"); err != nil || src.WebhookSecret != legacy {
		t.Fatalf("after rotation, new key alone: %v %+v", err, src)
	}
}

// The webhook routes' one-statement look-up opens the source's secret and
// every secret row through the sealed view. A row no key opens is kept in
// SecretsErr (the look-up itself succeeds, as the source read did before
// the secrets were read with it), while a source secret no key opens fails
// the look-up, as GetSource does.
func TestIngressSourceOpensSealedSecrets(t *testing.T) {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	st := SealSources(raw, &masterkey.Ring{Current: testKey(t, 1)})
	if err := st.CreateSourceWithSettings(ctx, &store.Source{ID: "s1", OrgID: "acme", Name: "hooks", Provider: "generic", RoutingKey: "rk1",
		VerificationMethod: "hmac_sha256", WebhookSecret: "orig", Enabled: true}, &store.SourceSettings{RateLimitRPM: 3},
		[]*store.SourceSecret{{ID: "a", Secret: "one"}, {ID: "b", Secret: "two"}}); err != nil {
		t.Fatal(err)
	}
	for _, get := range []func() (*store.IngressSource, error){
		func() (*store.IngressSource, error) { return st.GetIngressSource(ctx, "s1") },
		func() (*store.IngressSource, error) { return st.GetIngressSourceByName(ctx, "acme", "hooks") },
	} {
		is, err := get()
		if err != nil || is.SecretsErr != nil || is.Source.WebhookSecret != "orig" || is.Settings.RateLimitRPM != 3 || len(is.Secrets) != 2 {
			t.Fatalf("look-up: %v %+v", err, is)
		}
		got := map[string]bool{is.Secrets[0].Secret: true, is.Secrets[1].Secret: true}
		if !got["one"] || !got["two"] {
			t.Fatalf("secrets not opened: %+v %+v", is.Secrets[0], is.Secrets[1])
		}
	}
	// A secret row sealed with a key the ring does not hold.
	other := SealSources(raw, &masterkey.Ring{Current: testKey(t, 7)})
	if err := other.AddSourceSecret(ctx, &store.SourceSecret{ID: "c", SourceID: "s1", Secret: "three"}); err != nil {
		t.Fatal(err)
	}
	is, err := st.GetIngressSource(ctx, "s1")
	if err != nil || is.SecretsErr == nil || is.Secrets != nil || is.Source.WebhookSecret != "orig" {
		t.Fatalf("unopenable secret row: err %v, %+v", err, is)
	}
	// The source's own secret under a key the ring does not hold.
	if _, err := SealSources(raw, &masterkey.Ring{Current: testKey(t, 9)}).GetIngressSource(ctx, "s1"); err == nil {
		t.Fatal("a wrong master key opened the source's webhook secret")
	}
}
