package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"kici.dev/kici/internal/auth"
)

// The attack of the report: wrong tokens posted to /ui/login as fast as
// possible. After auth.DefaultFailureBurst failures the sign-in answers
// 429 with Retry-After and does not look at the token, the right one
// included, and creates no session.
func TestSignInIsThrottledAfterRepeatedFailures(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	_, body, _ := c.get("/ui/login")
	post := func(token string) (int, string, *http.Response) {
		csrf := csrfRe.FindStringSubmatch(body)[1]
		code, b, resp := c.post("/ui/login", url.Values{"csrf": {csrf}, "token": {token}})
		body = b
		return code, b, resp
	}
	for i := 0; i < auth.DefaultFailureBurst; i++ {
		if code, _, _ := post("kadm_guess" + strconv.Itoa(i)); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, code)
		}
	}
	for _, tok := range []string{"kadm_one-more", h.tokens[auth.RoleOwner]} {
		code, b, resp := post(tok)
		if code != http.StatusTooManyRequests || !strings.Contains(b, "Too many failed token checks") || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("after the burst: %d Retry-After %q", code, resp.Header.Get("Retry-After"))
		}
		for _, ck := range resp.Cookies() {
			if ck.Name == SessionCookie && ck.Value != "" {
				t.Fatal("a throttled sign-in created a session")
			}
		}
	}
}
