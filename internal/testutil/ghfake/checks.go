package ghfake

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request is one recorded write (or check-run lookup) call: method, path
// (no query), decoded JSON body and when it arrived.
type Request struct {
	Method string
	Path   string
	Body   map[string]any
	At     time.Time
}

// CheckRun is the fake's copy of a check run, as the last create/update
// left it.
type CheckRun struct {
	ID   int64
	Repo string
	// Fields holds the merged request bodies (name, head_sha, status,
	// conclusion, external_id, output, details_url, …).
	Fields map[string]any
	// States lists "status" or "status/conclusion" after every call.
	States []string
}

// Failure makes the next Count write calls answer Status with Header.
type Failure struct {
	Count  int
	Status int
	Header http.Header
}

// Fail queues a failure for the next write calls (check runs, statuses,
// comments).
func (s *Server) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f)
}

// SetDown makes every write call fail at the connection level (the
// connection is closed without an answer) until SetDown(false).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// SetInstallation makes GET /repos/{repo}/installation answer id.
func (s *Server) SetInstallation(repo string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installations[repo] = id
}

// Requests returns the recorded calls whose path starts with prefix, in
// arrival order.
func (s *Server) Requests(prefix string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// CheckRuns returns every check run of repo, in creation order.
func (s *Server) CheckRuns(repo string) []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CheckRun
	for _, c := range s.checks {
		if c.Repo == repo {
			cp := *c
			cp.Fields = map[string]any{}
			for k, v := range c.Fields {
				cp.Fields[k] = v
			}
			cp.States = append([]string(nil), c.States...)
			out = append(out, cp)
		}
	}
	return out
}

func stateOf(f map[string]any) string {
	st, _ := f["status"].(string)
	if c, _ := f["conclusion"].(string); c != "" {
		return st + "/" + c
	}
	return st
}

// serveWrite answers the write endpoints; false when r is not one.
// Repository calls are authenticated by the caller (serve) first.
func (s *Server) serveWrite(w http.ResponseWriter, r *http.Request, parts []string) bool {
	if len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation" && r.Method == "GET" {
		if err := s.checkJWT(r); err != nil {
			writeJSON(w, 401, map[string]string{"message": "A JSON web token could not be decoded: " + err.Error()})
			return true
		}
		s.mu.Lock()
		id, ok := s.installations[parts[1]+"/"+parts[2]]
		s.mu.Unlock()
		if !ok {
			notFound(w)
			return true
		}
		writeJSON(w, 200, map[string]any{"id": id})
		return true
	}
	isWrite := len(parts) >= 4 && parts[0] == "repos" && (parts[3] == "check-runs" || parts[3] == "statuses" || parts[3] == "issues" ||
		(parts[3] == "commits" && len(parts) == 6 && parts[5] == "check-runs"))
	return isWrite && s.handleWrite(w, r, parts)
}

func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request, parts []string) bool {
	var body map[string]any
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if len(raw) > 0 && json.Unmarshal(raw, &body) != nil {
		writeJSON(w, 400, map[string]string{"message": "Problems parsing JSON"})
		return true
	}
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return true
			}
		}
		writeJSON(w, 503, map[string]string{"message": "down"})
		return true
	}
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Body: body, At: time.Now()})
	if len(s.failures) > 0 && r.Method != "GET" {
		f := &s.failures[0]
		f.Count--
		status, hdr := f.Status, f.Header
		if f.Count <= 0 {
			s.failures = s.failures[1:]
		}
		s.mu.Unlock()
		for k, v := range hdr {
			w.Header()[k] = v
		}
		writeJSON(w, status, map[string]string{"message": http.StatusText(status)})
		return true
	}
	defer s.mu.Unlock()
	repo := parts[1] + "/" + parts[2]
	switch {
	case parts[3] == "check-runs" && len(parts) == 4 && r.Method == "POST":
		name, _ := body["name"].(string)
		sha, _ := body["head_sha"].(string)
		if name == "" || len(sha) != 40 {
			writeJSON(w, 422, map[string]string{"message": "Invalid request: name and head_sha are required"})
			return true
		}
		s.nextCheck++
		c := &CheckRun{ID: s.nextCheck, Repo: repo, Fields: body, States: []string{stateOf(body)}}
		s.checks = append(s.checks, c)
		writeJSON(w, 201, map[string]any{"id": c.ID, "name": name, "head_sha": sha})
	case parts[3] == "check-runs" && len(parts) == 5 && r.Method == "PATCH":
		id, _ := strconv.ParseInt(parts[4], 10, 64)
		for _, c := range s.checks {
			if c.ID == id && c.Repo == repo {
				for k, v := range body {
					c.Fields[k] = v
				}
				if _, ok := body["conclusion"]; !ok && body["status"] != nil && body["status"] != "completed" {
					delete(c.Fields, "conclusion")
				}
				c.States = append(c.States, stateOf(c.Fields))
				writeJSON(w, 200, map[string]any{"id": c.ID})
				return true
			}
		}
		notFound(w)
	case parts[3] == "commits" && r.Method == "GET":
		name := r.URL.Query().Get("check_name")
		list := []map[string]any{}
		for _, c := range s.checks {
			if c.Repo == repo && c.Fields["head_sha"] == parts[4] && (name == "" || c.Fields["name"] == name) {
				list = append(list, map[string]any{"id": c.ID, "name": c.Fields["name"], "external_id": c.Fields["external_id"]})
			}
		}
		writeJSON(w, 200, map[string]any{"total_count": len(list), "check_runs": list})
	case parts[3] == "statuses" && len(parts) == 5 && r.Method == "POST":
		writeJSON(w, 201, map[string]any{"state": body["state"], "context": body["context"]})
	case parts[3] == "issues" && len(parts) == 6 && parts[5] == "comments" && r.Method == "POST":
		writeJSON(w, 201, map[string]any{"id": len(s.requests), "body": body["body"]})
	default:
		notFound(w)
	}
	return true
}
