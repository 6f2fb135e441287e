package orchestrator

import (
	"net/http"
	"strings"
)

// unauthenticatedRequest reports whether r is served before any credential
// is checked, and so counts against httpguard's caps: webhook deliveries
// (their signature covers the body, so the body is read first),
// attestation verification, the web UI's sign-in form and its
// identity-provider sign-ins (/ui/login/<name> and its callback, which
// call the provider before anyone is known). Admin routes check the bearer token before
// reading a body and /ws authenticates in its first frame under its own
// 5 s timeout.
func unauthenticatedRequest(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/webhook/") || r.URL.Path == "/v1/verify-attestation" || r.URL.Path == "/ui/login" ||
		strings.HasPrefix(r.URL.Path, "/ui/login/")
}
