// Package ghfake is an in-process fake of the few GitHub REST endpoints
// kici calls (GET /app, POST /app/installations/{id}/access_tokens, GET
// /repos/{o}/{r}/contents/{path}?ref=, GET /repos/{o}/{r}/compare/{b}...{h},
// GET /repos/{o}/{r}/pulls/{n}/files, GET /repos/{o}/{r}, GET
// /repos/{o}/{r}/commits/{ref} and /repos/{o}/{r}/git/commits/{sha}
// (refs.go), GET
// /repos/{o}/{r}/collaborators/{u}/permission) and the write side of
// checks.go (check runs, commit statuses, issue comments, the repository's
// installation), recording every write and able to fail or go down, for tests: GitHub itself
// cannot be reached from a test. App JWTs are verified (RS256, issuer, expiry)
// against the key the fake generates, and installation tokens are checked
// on every repository call, so authentication bugs fail tests.
package ghfake

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Server is a running fake. Set its maps (under Lock/Unlock or before use).
type Server struct {
	*httptest.Server
	// AppID is the App id the fake accepts JWTs for.
	AppID int64
	// PrivateKeyPEM is the App's private key (PKCS#1 PEM).
	PrivateKeyPEM string
	// Token, when set, is accepted as a fixed bearer token too.
	Token string

	mu  sync.Mutex
	key *rsa.PrivateKey
	// Files maps "owner/repo@ref:path" to content.
	files map[string][]byte
	// Refs maps "owner/repo@branch" to the SHA it resolves to, so that a
	// file stored at a SHA is also served for that branch.
	refs        map[string]string
	defaults    map[string]string // repo → default branch
	messages    map[string]string // "owner/repo@sha" → commit message
	compares    map[string][]string
	pulls       map[string][]string
	permissions map[string]string
	tokens      map[string]int64
	// Calls counts requests by "METHOD path-without-query".
	calls map[string]int
	// contentsDelay slows every contents answer (to hold work in flight).
	contentsDelay time.Duration

	// Write side (checks.go): recorded calls, check runs, faults.
	installations map[string]int64
	requests      []Request
	checks        []*CheckRun
	nextCheck     int64
	failures      []Failure
	down          bool
}

// SetContentsDelay makes every contents request wait d before answering.
func (s *Server) SetContentsDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contentsDelay = d
}

// New starts a fake for App appID with a fresh 2048-bit key.
func New(appID int64) *Server {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s := &Server{AppID: appID, key: key, files: map[string][]byte{}, refs: map[string]string{}, compares: map[string][]string{},
		pulls: map[string][]string{}, permissions: map[string]string{}, tokens: map[string]int64{}, calls: map[string]int{},
		installations: map[string]int64{}, defaults: map[string]string{}, messages: map[string]string{}}
	s.PrivateKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// SetFile serves content for path in repo at ref.
func (s *Server) SetFile(repo, ref, path string, content []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[repo+"@"+ref+":"+path] = content
}

// SetBranch makes branch of repo resolve to sha for contents lookups.
func (s *Server) SetBranch(repo, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs[repo+"@"+branch] = sha
}

// SetCompare serves files for compare base...head of repo.
func (s *Server) SetCompare(repo, base, head string, files []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compares[repo+"@"+base+"..."+head] = files
}

// SetPullFiles serves files for pull request number of repo.
func (s *Server) SetPullFiles(repo string, number int64, files []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[repo+"#"+strconv.FormatInt(number, 10)] = files
}

// SetPermission sets user's permission on repo (unset users are 404).
func (s *Server) SetPermission(repo, user, perm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.permissions[repo+"/"+user] = perm
}

// Calls returns how many requests hit "METHOD path" (no query).
func (s *Server) Calls(methodPath string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[methodPath]
}

// CallsWithPrefix sums the requests whose "METHOD path" starts with p.
func (s *Server) CallsWithPrefix(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.calls {
		if strings.HasPrefix(k, p) {
			n += v
		}
	}
	return n
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, 404, map[string]string{"message": "Not Found"})
}

func (s *Server) checkJWT(r *http.Request) error {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return fmt.Errorf("no bearer")
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return &s.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(strconv.FormatInt(s.AppID, 10)), jwt.WithExpirationRequired())
	if err != nil {
		return err
	}
	if claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 11*time.Minute {
		return fmt.Errorf("jwt lifetime over 10 minutes")
	}
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[r.Method+" "+r.URL.Path]++
	s.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == "GET" && r.URL.Path == "/app":
		if err := s.checkJWT(r); err != nil {
			writeJSON(w, 401, map[string]string{"message": "A JSON web token could not be decoded: " + err.Error()})
			return
		}
		writeJSON(w, 200, map[string]any{"id": s.AppID, "slug": "kici-test-app", "name": "kici test app"})
		return
	case r.Method == "POST" && len(parts) == 4 && parts[0] == "app" && parts[1] == "installations" && parts[3] == "access_tokens":
		if err := s.checkJWT(r); err != nil {
			writeJSON(w, 401, map[string]string{"message": "Bad credentials: " + err.Error()})
			return
		}
		inst, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			notFound(w)
			return
		}
		tok := fmt.Sprintf("ghs_fake_%d_%d", inst, time.Now().UnixNano())
		s.mu.Lock()
		s.tokens[tok] = inst
		s.mu.Unlock()
		writeJSON(w, 201, map[string]any{"token": tok, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		return
	}
	if len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation" {
		s.serveWrite(w, r, parts)
		return
	}
	if len(parts) < 3 || parts[0] != "repos" {
		notFound(w)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	_, okTok := s.tokens[tok]
	s.mu.Unlock()
	if !okTok && (s.Token == "" || tok != s.Token) {
		writeJSON(w, 401, map[string]string{"message": "Bad credentials"})
		return
	}
	if s.serveWrite(w, r, parts) {
		return
	}
	repo := parts[1] + "/" + parts[2]
	s.mu.Lock()
	delay := s.contentsDelay
	s.mu.Unlock()
	if len(parts) > 3 && parts[3] == "contents" && delay > 0 {
		time.Sleep(delay)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serveRepoRead(w, r, repo, parts) {
		return
	}
	if len(parts) < 4 {
		notFound(w)
		return
	}
	switch {
	case parts[3] == "contents" && len(parts) > 4:
		path := strings.Join(parts[4:], "/")
		ref := r.URL.Query().Get("ref")
		if ref == "" {
			ref = "HEAD"
		}
		c, ok := s.files[repo+"@"+ref+":"+path]
		if !ok {
			if sha, isBranch := s.refs[repo+"@"+ref]; isBranch {
				c, ok = s.files[repo+"@"+sha+":"+path]
			}
		}
		if !ok {
			notFound(w)
			return
		}
		if strings.Contains(r.Header.Get("Accept"), "raw") {
			w.Header().Set("Content-Type", "application/vnd.github.raw")
			w.WriteHeader(200)
			_, _ = w.Write(c)
			return
		}
		writeJSON(w, 200, map[string]any{"type": "file", "size": len(c), "path": path})
	case parts[3] == "compare" && len(parts) == 5:
		files, ok := s.compares[repo+"@"+parts[4]]
		if !ok {
			notFound(w)
			return
		}
		writeJSON(w, 200, map[string]any{"files": page(files, r)})
	case parts[3] == "pulls" && len(parts) == 6 && parts[5] == "files":
		files, ok := s.pulls[repo+"#"+parts[4]]
		if !ok {
			notFound(w)
			return
		}
		writeJSON(w, 200, page(files, r))
	case parts[3] == "collaborators" && len(parts) == 6 && parts[5] == "permission":
		perm, ok := s.permissions[repo+"/"+parts[4]]
		if !ok {
			notFound(w)
			return
		}
		writeJSON(w, 200, map[string]any{"permission": perm, "role_name": perm})
	default:
		notFound(w)
	}
}

func page(files []string, r *http.Request) []map[string]string {
	p, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if p < 1 {
		p = 1
	}
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per < 1 {
		per = 30
	}
	out := []map[string]string{}
	for i := (p - 1) * per; i < len(files) && i < p*per; i++ {
		out = append(out, map[string]string{"filename": files[i], "status": "modified"})
	}
	return out
}
