package api

import (
	"bytes"
	"io"
	"net/http"
)

// noBody accepts the body of a route that takes no parameters: none, blank,
// or the empty JSON object `{}`. Anything else — a field (the route takes
// none, so every field is unknown), a non-object, trailing data — is
// refused with 400 before the route acts, so a mistyped request never
// rotates a key or reruns a run with the caller believing their option
// was honoured (docs/admin-api.md: unknown fields are rejected with 400).
// It writes the error response itself and reports false on failure.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		// Past MaxBodyBytes, or the client stopped sending: let decodeBody
		// word the error.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
		return decodeBody(w, r, &struct{}{})
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return decodeBody(w, r, &struct{}{})
}

// errReader returns err on every read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// bodyless wraps the handler of a route that takes no body with noBody.
func bodyless(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if noBody(w, r) {
			h(w, r)
		}
	}
}
