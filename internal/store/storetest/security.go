package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

func testSecurity(t *testing.T, s store.Store) {
	ctx := context.Background()
	audit := func(action string) *store.AccessLogEntry {
		return &store.AccessLogEntry{TokenID: "tok-1", Role: "owner", Action: action, Resource: "r"}
	}

	// Scoped admin token: scope stored, audit row written with it.
	tok := &store.AdminToken{ID: "adm-1", Label: "ci", Role: "auditor", TokenHash: "h-adm-1"}
	if err := s.CreateAdminTokenAudited(ctx, tok, "generic:acme:x", audit("token.create")); err != nil {
		t.Fatal(err)
	}
	if rk, err := s.AdminTokenRoutingKey(ctx, "adm-1"); err != nil || rk != "generic:acme:x" {
		t.Fatalf("routing key %q %v", rk, err)
	}
	// Authentication reads the scope with the token, in one statement.
	if got, err := s.GetAdminTokenByHash(ctx, "h-adm-1"); err != nil || got.ID != "adm-1" || got.RoutingKey != "generic:acme:x" {
		t.Fatalf("token by hash = %+v, %v; want adm-1 scoped to generic:acme:x", got, err)
	}
	if _, err := s.AdminTokenRoutingKey(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	if m, err := s.ListAdminTokenRoutingKeys(ctx); err != nil || m["adm-1"] != "generic:acme:x" {
		t.Fatalf("list keys %v %v", m, err)
	}
	// A duplicate hash conflicts and leaves no audit row behind.
	before, _ := s.ListAccessLog(ctx, store.AccessLogFilter{})
	if err := s.CreateAdminTokenAudited(ctx, &store.AdminToken{ID: "adm-2", Role: "owner", TokenHash: "h-adm-1"}, "", audit("token.create")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate hash: %v", err)
	}
	after, _ := s.ListAccessLog(ctx, store.AccessLogFilter{})
	if len(after) != len(before) {
		t.Fatalf("failed create wrote an audit row: %d -> %d", len(before), len(after))
	}
	if ok, err := s.RevokeAdminTokenAudited(ctx, "adm-1", audit("token.revoke")); err != nil || !ok {
		t.Fatalf("revoke %v %v", ok, err)
	}
	if ok, err := s.RevokeAdminTokenAudited(ctx, "adm-1", audit("token.revoke")); err != nil || ok {
		t.Fatalf("second revoke %v %v", ok, err)
	}
	if got, _ := s.GetAdminTokenByHash(ctx, "h-adm-1"); got == nil || !got.Revoked {
		t.Fatalf("token not revoked: %+v", got)
	}

	// Agent tokens.
	at := &store.AgentToken{ID: "agt-1", TokenHash: "h-agt-1", Prefix: "kat_1", Kind: store.AgentTokenStatic, Labels: []string{"gpu"},
		MandatoryLabels: []string{"secure", "gpu"}}
	if err := s.CreateAgentTokenAudited(ctx, at, audit("agent_token.create")); err != nil {
		t.Fatal(err)
	}
	if m, err := s.AgentTokenMandatoryLabels(ctx, "agt-1"); err != nil || len(m) != 2 || m[0] != "secure" || m[1] != "gpu" {
		t.Fatalf("mandatory labels %v %v", m, err)
	}
	if got, err := s.GetAgentTokenByHash(ctx, "h-agt-1"); err != nil || len(got.Labels) != 1 {
		t.Fatalf("token read back: %+v %v", got, err)
	}
	plainTok := &store.AgentToken{ID: "agt-2", TokenHash: "h-agt-2", Prefix: "kat_2", Kind: store.AgentTokenStatic}
	if err := s.CreateAgentToken(ctx, plainTok); err != nil {
		t.Fatal(err)
	}
	if m, err := s.AgentTokenMandatoryLabels(ctx, "agt-2"); err != nil || m != nil {
		t.Fatalf("token without mandatory labels: %v %v", m, err)
	}
	if _, err := s.AgentTokenMandatoryLabels(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	if err := s.RevokeAgentTokenAudited(ctx, "agt-1", time.Now(), audit("agent_token.revoke")); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAgentTokenAudited(ctx, "agt-1", time.Now(), audit("agent_token.revoke")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second revoke: %v", err)
	}

	// Secrets.
	if err := s.CreateSecretScope(ctx, "acme", "release", audit("secret.scope.create")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSecretScope(ctx, "acme", "release", nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate scope: %v", err)
	}
	if err := s.PutSecret(ctx, &store.SealedSecret{OrgID: "acme", Scope: "release", Key: "npm_token", Ciphertext: []byte{1, 2}}, audit("secret.set")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSecret(ctx, &store.SealedSecret{OrgID: "acme", Scope: "deploy", Key: "k", Ciphertext: []byte{3}}, nil); err != nil {
		t.Fatal(err) // creates the scope
	}
	if sc, _ := s.ListSecretScopes(ctx, "acme"); len(sc) != 2 || sc[0] != "deploy" || sc[1] != "release" {
		t.Fatalf("scopes %v", sc)
	}
	if sc, _ := s.ListSecretScopes(ctx, "other"); len(sc) != 0 {
		t.Fatalf("other org sees scopes %v", sc)
	}
	if keys, err := s.ListSecretKeys(ctx, "acme", "release"); err != nil || len(keys) != 1 || keys[0] != "npm_token" {
		t.Fatalf("keys %v %v", keys, err)
	}
	if _, err := s.ListSecretKeys(ctx, "acme", "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing scope: %v", err)
	}
	got, err := s.GetSecret(ctx, "acme", "release", "npm_token")
	if err != nil || !bytes.Equal(got.Ciphertext, []byte{1, 2}) {
		t.Fatalf("get %v %v", got, err)
	}
	// Reseal everything in one go.
	counts, err := s.ResealAll(ctx, func(v *store.SealedValue) ([]byte, error) {
		return append([]byte{9}, v.Ciphertext...), nil
	}, audit("key.rotate"))
	if err != nil || counts[store.SealedKindSecret] != 2 {
		t.Fatalf("reseal %v %v", counts, err)
	}
	got, _ = s.GetSecret(ctx, "acme", "release", "npm_token")
	if !bytes.Equal(got.Ciphertext, []byte{9, 1, 2}) {
		t.Fatalf("after reseal %v", got.Ciphertext)
	}
	// A failing reseal changes nothing.
	if _, err := s.ResealAll(ctx, func(v *store.SealedValue) ([]byte, error) {
		if v.Scope == "release" {
			return nil, errors.New("boom")
		}
		return []byte{0}, nil
	}, audit("key.rotate")); err == nil {
		t.Fatal("reseal error swallowed")
	}
	if got, _ := s.GetSecret(ctx, "acme", "deploy", "k"); !bytes.Equal(got.Ciphertext, []byte{9, 3}) {
		t.Fatalf("partial reseal committed: %v", got.Ciphertext)
	}
	if err := s.DeleteSecret(ctx, "acme", "release", "npm_token", audit("secret.delete")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSecret(ctx, "acme", "release", "npm_token", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := s.DeleteSecretScope(ctx, "acme", "deploy", audit("secret.scope.delete")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSecret(ctx, "acme", "deploy", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("secret survived its scope: %v", err)
	}

	// Access log: every audited write above, newest first, filterable.
	all, err := s.ListAccessLog(ctx, store.AccessLogFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"secret.scope.delete", "secret.delete", "key.rotate", "secret.set", "secret.scope.create",
		"agent_token.revoke", "agent_token.create", "token.revoke", "token.create"}
	if len(all) != len(want) {
		t.Fatalf("access log has %d entries, want %d: %+v", len(all), len(want), all)
	}
	for i, w := range want {
		if all[i].Action != w {
			t.Fatalf("entry %d: %s, want %s", i, all[i].Action, w)
		}
	}
	if f, _ := s.ListAccessLog(ctx, store.AccessLogFilter{Action: "secret.set"}); len(f) != 1 {
		t.Fatalf("filter by action: %d", len(f))
	}
	if f, _ := s.ListAccessLog(ctx, store.AccessLogFilter{Limit: 2, Offset: 1}); len(f) != 2 || f[0].Action != "secret.delete" {
		t.Fatalf("paging: %+v", f)
	}
}
