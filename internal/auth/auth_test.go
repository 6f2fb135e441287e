package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

func TestTokenFormatsAndHash(t *testing.T) {
	a := NewAgentTokenPlaintext()
	if !regexp.MustCompile(`^kat_[0-9a-f]{64}$`).MatchString(a) {
		t.Fatalf("agent token %q", a)
	}
	k := NewAdminTokenPlaintext()
	if !regexp.MustCompile(`^kadm_[0-9a-f]{64}$`).MatchString(k) {
		t.Fatalf("admin token %q", k)
	}
	if a == NewAgentTokenPlaintext() {
		t.Fatal("tokens repeat")
	}
	// sha256("abc")
	if got := Hash("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Hash = %s", got)
	}
	if Prefix(a) != a[:12] || len(Prefix(a)) != 12 || Prefix("short") != "short" {
		t.Fatal("Prefix")
	}
}

func TestAgentTokenValidate(t *testing.T) {
	ctx := context.Background()
	st := teststore.SQLite(t)
	aa := NewAgentAuth(st)

	plain, err := aa.IssueEphemeral(ctx, "kici-local-00000001", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := aa.Validate(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Kind != store.AgentTokenEphemeral || tok.BoundAgentID != "kici-local-00000001" || tok.ExpiresAt == nil {
		t.Fatalf("token row %+v", tok)
	}
	if tok.TokenHash != Hash(plain) || tok.Prefix != Prefix(plain) {
		t.Fatal("stored hash/prefix do not match the plaintext")
	}

	// unknown
	if _, err := aa.Validate(ctx, NewAgentTokenPlaintext()); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("unknown token: %v", err)
	}
	// expired: validate with a clock past the expiry
	aa.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := aa.Validate(ctx, plain); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}
	aa.now = func() time.Time { return time.Now().UTC() }

	// static, then revoked
	sp, srow, err := aa.IssueStatic(ctx, []string{"gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aa.Validate(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAgentToken(ctx, srow.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := aa.Validate(ctx, sp); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked token: %v", err)
	}

	// store failure is not ErrInvalidToken
	st.Close()
	if _, err := aa.Validate(ctx, plain); err == nil || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("closed store: %v", err)
	}
}

func TestMatrixCounts(t *testing.T) {
	// KiCI's 23 permissions; owner 23, admin 21, auditor 6 — plus
	// kici's departure granting ci_trust.read to the auditor (7).
	kici := []Permission{PermContextCreate, PermContextUpdate, PermContextDelete, PermContextRead,
		PermSecretRead, PermSecretWrite, PermSecretDelete, PermSecretReveal, PermAuditRead,
		PermTokenManage, PermKeyRotate, PermRunRead, PermRunCancel, PermEventLogRead,
		PermEventLogReadPayload, PermAccessLogRead, PermScheduledJobTrigger, PermAttestationRetry,
		PermEventDLQRead, PermEventDLQManage, PermOrchestratorDrain, PermCITrustRead, PermCITrustAdmin}
	count := map[Role]int{}
	for _, p := range kici {
		for _, r := range []Role{RoleOwner, RoleAdmin, RoleAuditor} {
			if HasPermission(r, p) {
				count[r]++
			}
		}
	}
	if len(kici) != 23 || count[RoleOwner] != 23 || count[RoleAdmin] != 21 || count[RoleAuditor] != 7 {
		t.Fatalf("KiCI matrix counts: %v", count)
	}
	for _, p := range []Permission{PermTokenManage, PermKeyRotate} {
		if HasPermission(RoleAdmin, p) {
			t.Errorf("admin must not hold %s", p)
		}
	}
	// every permission is held by owner; unknown role/permission hold nothing
	for _, p := range Permissions() {
		if !HasPermission(RoleOwner, p) {
			t.Errorf("owner lacks %s", p)
		}
	}
	if HasPermission("root", PermRunRead) || HasPermission(RoleOwner, "nope") {
		t.Fatal("unknown role or permission granted")
	}
}

func TestRequireRBAC(t *testing.T) {
	ctx := context.Background()
	st := teststore.SQLite(t)
	const bootstrap = "kadm_bootstrap-test-token"
	a := NewAdminAuth(st, []string{bootstrap, ""})

	owner, err := a.EnsureOwnerToken(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := a.IssueAdminToken(ctx, "ops", RoleAdmin, 0)
	if err != nil {
		t.Fatal(err)
	}
	auditor, _, err := a.IssueAdminToken(ctx, "audit", RoleAuditor, 0)
	if err != nil {
		t.Fatal(err)
	}
	expired, _, err := a.IssueAdminToken(ctx, "old", RoleOwner, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	revoked, revRow, err := a.IssueAdminToken(ctx, "gone", RoleOwner, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAdminToken(ctx, revRow.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.IssueAdminToken(ctx, "x", "root", 0); err == nil {
		t.Fatal("unknown role accepted")
	}
	wait.Elapse(ctx, 5*time.Millisecond) // the wall clock moves past the 1 ms token's expiry

	var seen Principal
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = PrincipalFrom(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	cases := []struct {
		name, header string
		perm         Permission
		status       int
		body         string
	}{
		{"no header", "", PermRunRead, 401, "Missing authorization"},
		{"basic scheme", "Basic abc", PermRunRead, 401, "Missing authorization"},
		{"empty bearer", "Bearer ", PermRunRead, 401, "Missing authorization"},
		{"unknown", "Bearer " + NewAdminTokenPlaintext(), PermRunRead, 401, "Invalid or expired token"},
		{"expired", "Bearer " + expired, PermRunRead, 401, "Invalid or expired token"},
		{"revoked", "Bearer " + revoked, PermRunRead, 401, "Invalid or expired token"},
		{"owner token.manage", "Bearer " + owner, PermTokenManage, 204, ""},
		{"bootstrap owner", "bearer " + bootstrap, PermKeyRotate, 204, ""},
		{"admin run.cancel", "Bearer " + admin, PermRunCancel, 204, ""},
		{"admin token.manage", "Bearer " + admin, PermTokenManage, 403, `Role "admin" does not have permission "token.manage"`},
		{"auditor run.read", "Bearer " + auditor, PermRunRead, 204, ""},
		{"auditor run.cancel", "Bearer " + auditor, PermRunCancel, 403, `Role "auditor" does not have permission "run.cancel"`},
		{"auditor source.create", "Bearer " + auditor, PermSourceCreate, 403, `Role "auditor" does not have permission "source.create"`},
		{"auditor source.read", "Bearer " + auditor, PermSourceRead, 204, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/api/v1/admin/x", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			a.Require(tc.perm, ok).ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.status, rec.Body)
			}
			if tc.body != "" {
				var body map[string]string
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["error"] != tc.body {
					t.Fatalf("body %q, want error %q", rec.Body, tc.body)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Fatalf("content type %q", ct)
				}
			}
		})
	}
	// the principal reaches the handler
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+auditor)
	a.Require(PermRunRead, ok).ServeHTTP(httptest.NewRecorder(), req)
	if seen.Role != RoleAuditor || seen.Label != "audit" {
		t.Fatalf("principal %+v", seen)
	}

	// store failure ⇒ 503, fails closed
	st.Close()
	rec := httptest.NewRecorder()
	req = httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+owner)
	a.Require(PermRunRead, ok).ServeHTTP(rec, req)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "Authentication unavailable") {
		t.Fatalf("store down: %d %s", rec.Code, rec.Body)
	}
	// the bootstrap token needs no store
	rec = httptest.NewRecorder()
	req.Header.Set("Authorization", "Bearer "+bootstrap)
	a.Require(PermRunRead, ok).ServeHTTP(rec, req)
	if rec.Code != 204 {
		t.Fatalf("bootstrap with store down: %d", rec.Code)
	}
}

func TestRequireUnknownPermissionPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an unknown permission")
		}
	}()
	NewAdminAuth(nil, nil).Require("run.reed", http.NotFoundHandler())
}
