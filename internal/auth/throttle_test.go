package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/teststore"
)

// The attack: one address tries wrong admin tokens as fast as it can. The
// first DefaultFailureBurst get 401; then every request from that address
// gets 429 with Retry-After before its token is looked at (the right token
// included, so the answer tells nothing), other addresses are untouched,
// and once Retry-After has passed one more try is allowed.
func TestFailedTokenChecksAreThrottledPerClient(t *testing.T) {
	st := teststore.SQLite(t)
	a := NewAdminAuth(st, nil)
	owner, err := a.EnsureOwnerToken(context.Background(), "first")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	a.failures.now = func() time.Time { return now }
	h := a.Require(PermContextRead, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	call := func(addr, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/api/v1/admin/runs", nil)
		r.RemoteAddr = addr
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const attacker, other = "203.0.113.7:40000", "198.51.100.2:5555"
	for i := 0; i < DefaultFailureBurst; i++ {
		if w := call(attacker, "kadm_guess"+strconv.Itoa(i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, w.Code)
		}
	}
	for i, tok := range []string{"kadm_guess-more", owner} {
		w := call("203.0.113.7:40001", tok) // same address, another port
		if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "Too many failed token checks") {
			t.Fatalf("request %d after the burst: %d %s, want 429", i, w.Code, w.Body)
		}
		if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); ra < 1 || ra > int(DefaultFailureInterval/time.Second) {
			t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
		}
	}
	if w := call(other, owner); w.Code != http.StatusNoContent {
		t.Fatalf("another address: %d", w.Code)
	}
	now = now.Add(DefaultFailureInterval)
	if w := call(attacker, owner); w.Code != http.StatusNoContent {
		t.Fatalf("after Retry-After, the right token: %d", w.Code)
	}
	if w := call(attacker, "kadm_again"); w.Code != http.StatusUnauthorized {
		t.Fatalf("one more guess after the wait: %d, want 401", w.Code)
	}
	if w := call(attacker, "kadm_again2"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the guess after that: %d, want 429", w.Code)
	}
}
