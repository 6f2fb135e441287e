package api

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/contexts"
	"kici.dev/kici/internal/trigger/pattern"
)

// bindContext is POST /contexts/{name}/bind: 201 {created:true}, or 200
// {created:false} when an identical binding exists.
func (s *server) bindContext(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OrgID        string `json:"orgId"`
		ScopePattern string `json:"scopePattern"`
		HostPattern  string `json:"hostPattern"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	name := r.PathValue("name")
	if msg := validOrgAndName(body.OrgID, name); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if body.HostPattern == "" {
		body.HostPattern = "**"
	}
	if msg := scopePatternProblem(body.ScopePattern); msg != "" {
		writeError(w, http.StatusBadRequest, "scopePattern: "+msg)
		return
	}
	if msg := hostPatternProblem(body.HostPattern); msg != "" {
		writeError(w, http.StatusBadRequest, "hostPattern: "+msg)
		return
	}
	created, err := s.d.Store.BindContext(r.Context(), body.OrgID, name, body.ScopePattern, body.HostPattern)
	if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, apitypes.Created{Created: created})
}

// maxBindingPatternLen bounds a binding's scope and host patterns (bytes).
const maxBindingPatternLen = 255

var (
	// scopePlaceholderRe matches the agent placeholders a scope pattern may
	// hold (contexts.ScopeGranted substitutes them at dispatch).
	scopePlaceholderRe = regexp.MustCompile(`\$\{(?:agentId|host|label:[A-Za-z0-9._-]{1,128})\}`)
	// scopeSegmentRe is one "/"-separated segment of a scope pattern once
	// placeholders are substituted: scope characters plus glob syntax.
	scopeSegmentRe = regexp.MustCompile(`^[A-Za-z0-9._*?{},\[\]-]+$`)
)

// scopePatternProblem returns why p is not a valid binding scope pattern
// ("" when it is): 1..255 bytes, optionally prefixed "pg:", "/"-separated
// segments of [A-Za-z0-9._-] and the glob characters *?{},[] (no empty,
// "." or ".." segment), placeholders ${agentId}, ${host} and
// ${label:NAME} allowed anywhere, and a glob that compiles with paired
// brackets and braces. A pattern outside this shape could only ever grant
// a scope no secret lives in, or reach one by path tricks.
func scopePatternProblem(p string) string {
	if p == "" {
		return "required"
	}
	if len(p) > maxBindingPatternLen {
		return fmt.Sprintf("at most %d characters", maxBindingPatternLen)
	}
	// Placeholders stand for one plain value; "x" keeps the shape check
	// honest without accepting their braces as glob syntax.
	body := scopePlaceholderRe.ReplaceAllString(strings.TrimPrefix(p, "pg:"), "x")
	if strings.Contains(body, "${") {
		return fmt.Sprintf("%q has an unknown placeholder (allowed: ${agentId}, ${host}, ${label:NAME})", p)
	}
	for _, seg := range strings.Split(body, "/") {
		switch {
		case seg == "":
			return fmt.Sprintf("%q has an empty segment (no leading, trailing or doubled /)", p)
		case seg == "." || seg == "..":
			return fmt.Sprintf("%q has a %q segment", p, seg)
		case !scopeSegmentRe.MatchString(seg):
			return fmt.Sprintf("%q: segments hold only letters, digits, . _ - and the glob characters * ? { } , [ ]", p)
		}
	}
	if err := pattern.ValidateGlob(body); err != nil {
		return err.Error()
	}
	return ""
}

// hostPatternProblem returns why p is not a valid binding host pattern
// ("" when it is), following contexts.HostMatches: "*" or "**" (any
// agent), "/source/" or "/source/i" holding a Go regular expression that
// compiles, or an exact name or glob without blanks that compiles with
// paired brackets and braces. An invalid pattern would never match, so
// the binding would silently grant nothing.
func hostPatternProblem(p string) string {
	switch {
	case p == "*" || p == "**":
		return ""
	case len(p) > maxBindingPatternLen:
		return fmt.Sprintf("at most %d characters", maxBindingPatternLen)
	case strings.IndexFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Sprintf("%q must not contain whitespace or control characters", p)
	case strings.HasPrefix(p, "/"):
		_, isRegex, err := contexts.HostRegex(p)
		if !isRegex {
			return fmt.Sprintf("%q: a regular expression is written /source/ or /source/i", p)
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	if err := pattern.ValidateGlob(p); err != nil {
		return err.Error()
	}
	return ""
}
