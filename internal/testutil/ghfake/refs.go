package ghfake

import (
	"net/http"
	"strings"
)

// SetDefaultBranch makes GET /repos/{repo} report branch as the default
// branch ("main" when unset).
func (s *Server) SetDefaultBranch(repo, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults[repo] = branch
}

// SetTag makes tag of repo resolve to sha (commits and contents lookups,
// as "refs/tags/<tag>").
func (s *Server) SetTag(repo, tag, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs[repo+"@refs/tags/"+tag] = sha
}

// SetCommitMessage makes GET /repos/{repo}/git/commits/{sha} answer msg
// (unset commits are 404).
func (s *Server) SetCommitMessage(repo, sha, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages[repo+"@"+sha] = msg
}

// serveRepoRead answers GET /repos/{o}/{r}, GET
// /repos/{o}/{r}/git/commits/{sha} and GET /repos/{o}/{r}/commits/{ref}
// (ref "heads/<b>", "tags/<t>", a bare branch name or a 40-hex SHA, which
// is echoed); called with s.mu held. It reports whether it handled the
// request.
func (s *Server) serveRepoRead(w http.ResponseWriter, r *http.Request, repo string, parts []string) bool {
	if r.Method != "GET" {
		return false
	}
	if len(parts) == 3 {
		def := s.defaults[repo]
		if def == "" {
			def = "main"
		}
		writeJSON(w, 200, map[string]any{"full_name": repo, "default_branch": def, "clone_url": "https://github.com/" + repo + ".git"})
		return true
	}
	if len(parts) == 6 && parts[3] == "git" && parts[4] == "commits" {
		msg, ok := s.messages[repo+"@"+parts[5]]
		if !ok {
			notFound(w)
			return true
		}
		writeJSON(w, 200, map[string]any{"sha": parts[5], "message": msg})
		return true
	}
	if parts[3] != "commits" || len(parts) < 5 || parts[len(parts)-1] == "check-runs" {
		return false
	}
	ref := strings.Join(parts[4:], "/")
	var sha string
	switch {
	case strings.HasPrefix(ref, "heads/"):
		b := strings.TrimPrefix(ref, "heads/")
		if sha = s.refs[repo+"@"+b]; sha == "" {
			sha = s.refs[repo+"@refs/heads/"+b]
		}
	case strings.HasPrefix(ref, "tags/"):
		sha = s.refs[repo+"@refs/"+ref]
	case len(ref) == 40 && strings.Trim(ref, "0123456789abcdef") == "":
		sha = ref
	default:
		sha = s.refs[repo+"@"+ref]
	}
	if sha == "" {
		writeJSON(w, 422, map[string]string{"message": "No commit found for SHA: " + ref})
		return true
	}
	if strings.Contains(r.Header.Get("Accept"), "sha") {
		w.Header().Set("Content-Type", "application/vnd.github.sha")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(sha))
		return true
	}
	writeJSON(w, 200, map[string]any{"sha": sha})
	return true
}
