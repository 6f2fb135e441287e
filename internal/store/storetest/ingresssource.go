package storetest

import (
	"errors"
	"testing"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// testIngressSource covers GetIngressSource and GetIngressSourceByName:
// the source, its settings and every secret (revoked ones included,
// oldest first) as the separate reads give them; no settings and no
// secrets read as nil; a disabled source is returned as it is (the routes
// refuse it); an unknown id or name, or a name in another org, is
// ErrNotFound; and what changes is seen by the next look-up.
func testIngressSource(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	src := &store.Source{ID: "src-is", OrgID: "acme", Name: "hooks", Provider: provider.Generic, RoutingKey: "generic:hooks",
		VerificationMethod: "hmac_sha256", WebhookSecret: "orig", Enabled: true, CreatedAt: at(0)}
	set := &store.SourceSettings{MaxPayloadBytes: 4096, RateLimitRPM: 11, SignatureHeader: "X-Sig", IPAllowlist: []string{"10.0.0.9"},
		Git: &store.GitConfig{Preset: "gitea", GitURLTemplate: "https://g/{repo}.git"}}
	must(t, s.CreateSourceWithSettings(ctx, src, set, []*store.SourceSecret{
		{ID: "is-2", Secret: "two", CreatedAt: at(2)}, {ID: "is-1", Secret: "one", CreatedAt: at(1)}, {ID: "is-3", Secret: "three", CreatedAt: at(3)}}))
	must(t, s.RevokeSourceSecret(ctx, "src-is", "is-1", at(4)))
	bare := &store.Source{ID: "src-bare", OrgID: "acme", Name: "bare", Provider: provider.GitHub, RoutingKey: "github:7",
		VerificationMethod: "hmac_sha256", WebhookSecret: "gh", Enabled: false, CreatedAt: at(5)}
	must(t, s.CreateSource(ctx, bare))

	// check compares a look-up with what the separate reads return.
	check := func(what string, got *store.IngressSource, err error, id string) {
		t.Helper()
		must(t, err)
		wantSrc, err := s.GetSource(ctx, id)
		must(t, err)
		if d := diff(wantSrc, got.Source); d != "" {
			t.Fatalf("%s: source differs from GetSource: %s", what, d)
		}
		wantSet, err := s.GetSourceSettings(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			wantSet = nil
		} else {
			must(t, err)
		}
		if d := diff(wantSet, got.Settings); d != "" {
			t.Fatalf("%s: settings differ from GetSourceSettings: %s", what, d)
		}
		wantSecs, err := s.ListSourceSecrets(ctx, id, false)
		must(t, err)
		if len(wantSecs) == 0 {
			wantSecs = nil
		}
		if d := diff(wantSecs, got.Secrets); d != "" {
			t.Fatalf("%s: secrets differ from ListSourceSecrets: %s", what, d)
		}
		if got.SecretsErr != nil {
			t.Fatalf("%s: SecretsErr = %v", what, got.SecretsErr)
		}
	}

	got, err := s.GetIngressSource(ctx, "src-is")
	check("by id", got, err, "src-is")
	if got.Settings == nil || got.Settings.RateLimitRPM != 11 || got.Settings.SignatureHeader != "X-Sig" || got.Settings.Git == nil {
		t.Fatalf("settings = %+v", got.Settings)
	}
	if len(got.Secrets) != 3 || got.Secrets[0].ID != "is-1" || got.Secrets[0].RevokedAt == nil || !got.Secrets[0].RevokedAt.Equal(at(4)) ||
		got.Secrets[1].Secret != "two" || got.Secrets[2].Secret != "three" || got.Secrets[2].RevokedAt != nil {
		t.Fatalf("secrets = %+v, want is-1 (revoked), is-2, is-3", got.Secrets)
	}
	got, err = s.GetIngressSourceByName(ctx, "acme", "hooks")
	check("by name", got, err, "src-is")

	got, err = s.GetIngressSource(ctx, "src-bare")
	check("without settings or secrets", got, err, "src-bare")
	if got.Settings != nil || got.Secrets != nil || got.Source.Enabled || got.Source.WebhookSecret != "gh" {
		t.Fatalf("bare source = %+v", got)
	}

	for _, q := range []struct {
		what string
		err  error
	}{
		{"unknown id", func() error { _, err := s.GetIngressSource(ctx, "nope"); return err }()},
		{"unknown name", func() error { _, err := s.GetIngressSourceByName(ctx, "acme", "nope"); return err }()},
		{"name in another org", func() error { _, err := s.GetIngressSourceByName(ctx, "other", "hooks"); return err }()},
	} {
		if !errors.Is(q.err, store.ErrNotFound) {
			t.Fatalf("%s: err = %v, want ErrNotFound", q.what, q.err)
		}
	}

	// Nothing is kept between look-ups: a disable, a revocation, new
	// settings and a deletion are seen by the next one.
	must(t, s.SetSourceEnabled(ctx, "src-is", false))
	must(t, s.RevokeSourceSecret(ctx, "src-is", "is-3", at(6)))
	set.RateLimitRPM = 12
	set.SourceID = "src-is"
	must(t, s.PutSourceSettings(ctx, set))
	got, err = s.GetIngressSourceByName(ctx, "acme", "hooks")
	check("after changes", got, err, "src-is")
	if got.Source.Enabled || got.Secrets[2].RevokedAt == nil || got.Settings.RateLimitRPM != 12 {
		t.Fatalf("after changes = %+v %+v %+v", got.Source, got.Settings, got.Secrets[2])
	}
	must(t, s.DeleteSource(ctx, "src-is", &store.AccessLogEntry{TokenID: "tok", Role: "owner", Action: "source.delete", Resource: "source:src-is"}))
	if _, err := s.GetIngressSource(ctx, "src-is"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted source: err = %v, want ErrNotFound", err)
	}
}
