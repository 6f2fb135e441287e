// Package forgefake is a recording fake of the Gitea (also Forgejo, Gogs)
// and GitLab REST endpoints kici writes to — commit statuses and comments —
// for tests: neither forge can be reached from a test. Every request is
// recorded with its escaped path and decoded body; calls without the
// expected credential answer 401, so authentication bugs fail tests.
package forgefake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Kinds of fake.
const (
	// Gitea expects "Authorization: token <Token>" and serves
	// /api/v1/repos/{owner}/{repo}/statuses/{sha} and issue comments.
	Gitea = "gitea"
	// GitLab expects "PRIVATE-TOKEN: <Token>" and serves
	// /api/v4/projects/{id}/statuses/{sha} and notes.
	GitLab = "gitlab"
)

// Request is one recorded call.
type Request struct {
	Method string
	// Path is the escaped path (GitLab project ids stay "acme%2Fapi").
	Path string
	Body map[string]any
	// Authorized reports whether the expected credential came with it.
	Authorized bool
	At         time.Time
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	Kind  string
	Token string

	mu   sync.Mutex
	reqs []Request
}

// New starts a fake of kind (Gitea or GitLab) accepting token.
func New(kind, token string) *Server {
	s := &Server{Kind: kind, Token: token}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests returns the recorded calls whose escaped path starts with
// prefix, in arrival order.
func (s *Server) Requests(prefix string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.reqs {
		if strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = json.Unmarshal(raw, &body)
	ok := false
	switch s.Kind {
	case Gitea:
		ok = r.Header.Get("Authorization") == "token "+s.Token
	case GitLab:
		ok = r.Header.Get("PRIVATE-TOKEN") == s.Token
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.EscapedPath(), Body: body, Authorized: ok, At: time.Now()})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(401)
		_, _ = w.Write([]byte(`{"message":"401 Unauthorized"}`))
		return
	}
	prefix := "/api/v1/repos/"
	if s.Kind == GitLab {
		prefix = "/api/v4/projects/"
	}
	if r.Method != "POST" || !strings.HasPrefix(r.URL.EscapedPath(), prefix) {
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`{"message":"404 Not Found"}`))
		return
	}
	w.WriteHeader(201)
	_ = json.NewEncoder(w).Encode(body)
}
