package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/ctxgate"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger/pattern"
)

// Context routes (KiCI orchestrator 0.2.0 routes/admin-contexts): create
// (upsert), bind, policy PATCH, list, show, delete, templates, variables
// and (kici's addition) source overrides, open to unscoped tokens only.
// Writes are gated by the secret.* permissions as in KiCI; reads use
// context.read, where KiCI uses secret.read (an inconsistency that would
// hide contexts from an auditor; variables are configuration, not
// secrets).

var (
	contextNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	orgIDRe       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	varKeyRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)
)

// Limits on context input.
const (
	maxContextListLen   = 100
	maxContextPatternLn = 512
	maxVariableValueLen = 64 << 10
	// maxConcurrencyLimit bounds concurrencyLimit; a higher cap is no
	// cap in practice, and a bound keeps the value a sane int everywhere.
	maxConcurrencyLimit = 10000
	// minConcurrencyTimeoutMs and maxConcurrencyTimeoutMs bound
	// concurrencyTimeoutMs (one second to one day): a shorter wait would
	// cancel jobs before a slot could plausibly free up, a longer one keeps
	// a job held past any useful deploy window.
	minConcurrencyTimeoutMs = 1000
	maxConcurrencyTimeoutMs = 86_400_000
)

// contextPolicy is the policy part of a create, template or PATCH body.
// json.RawMessage keeps "absent" (nil) apart from "null".
type contextPolicy struct {
	BranchRestrictions  json.RawMessage `json:"branchRestrictions"`
	RequiredReviewers   json.RawMessage `json:"requiredReviewers"`
	WaitTimerSeconds    json.RawMessage `json:"waitTimerSeconds"`
	HoldExpirySeconds   json.RawMessage `json:"holdExpirySeconds"`
	MinimumTrust        json.RawMessage `json:"minimumTrust"`
	Enabled             json.RawMessage `json:"enabled"`
	AllowLocalExecution json.RawMessage `json:"allowLocalExecution"`
	TriggerTypeFilters  json.RawMessage `json:"triggerTypeFilters"`
	RepoPatterns        json.RawMessage `json:"repoPatterns"`
	AllowUntrusted      json.RawMessage `json:"allowUntrusted"`
	ConcurrencyLimit    json.RawMessage `json:"concurrencyLimit"`
	// ConcurrencyStrategy is "queue" or "cancel-pending"; null means queue.
	ConcurrencyStrategy json.RawMessage `json:"concurrencyStrategy"`
	// ConcurrencyTimeoutMs is the slot wait in milliseconds; null means
	// the default.
	ConcurrencyTimeoutMs json.RawMessage `json:"concurrencyTimeoutMs"`
}

// ContextTriggerTypes are the values a context's triggerTypeFilters may
// hold: the trigger types a run records (store.Run.TriggerType), i.e. the
// lock file's trigger kinds with the pull-request kind under its event
// name pull_request, plus manual for runs an operator starts. The gate
// compares exactly, so a value outside this set could never match.
var ContextTriggerTypes = []string{"comment", "create", "delete", "dispatch", "fork", "generic_webhook", "job_complete",
	"kici_event", "lifecycle", "manual", "pull_request", "push", "release", "rerun", "review", "review_comment", "schedule",
	"star", "status", "tag", "watch", "webhook", "workflow_complete", "workflow_run"}

func decodeTriggerTypes(m json.RawMessage) ([]string, error) {
	l, err := decodeStringList("triggerTypeFilters", m)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, t := range l {
		if seen[t] {
			return nil, fmt.Errorf("triggerTypeFilters: %q is listed twice", t)
		}
		seen[t] = true
		if t == "pr" {
			return nil, errors.New(`triggerTypeFilters: "pr" is recorded on runs as "pull_request"; use that`)
		}
		if !slices.Contains(ContextTriggerTypes, t) {
			return nil, fmt.Errorf("triggerTypeFilters: unknown trigger type %q (allowed: %s)", t, strings.Join(ContextTriggerTypes, ", "))
		}
	}
	return l, nil
}

func decodeRepoPatterns(m json.RawMessage) ([]string, error) {
	l, err := decodeStringList("repoPatterns", m)
	if err != nil {
		return nil, err
	}
	for _, p := range l {
		body := strings.TrimLeft(p, "!")
		switch {
		case body == "":
			return nil, fmt.Errorf("repoPatterns: %q is not a pattern (a negation needs a pattern after the !)", p)
		case !strings.Contains(body, "/") && strings.Trim(body, "*") != "":
			return nil, fmt.Errorf("repoPatterns: %q names no repository: a pattern matches owner/name (e.g. acme/* or acme/app); only ** matches every repository without a /", p)
		case !strings.Contains(body, "/") && body != "**":
			return nil, fmt.Errorf("repoPatterns: %q can never match (* does not cross the / of owner/name); use ** or */*", p)
		}
		if err := globProblem(p); err != nil {
			return nil, fmt.Errorf("repoPatterns: %v", err)
		}
	}
	return l, nil
}

// globProblem returns why p is not an acceptable glob: it does not compile
// with pattern.CompileGlob, or its brackets or braces do not pair up. The
// pairing check matters because the glob compiler, like picomatch, reads an
// unclosed "[" or "{" as a literal character, so "[abc" would be stored
// and then silently never match a repository or context name.
func globProblem(p string) error {
	if msg := unbalancedGlob(p); msg != "" {
		return fmt.Errorf("glob %q: %s", p, msg)
	}
	if _, err := pattern.CompileGlob(p); err != nil {
		return err
	}
	return nil
}

// unbalancedGlob reports an unclosed "[" or "{" or a stray "]" or "}" in
// glob p ("" when they pair up). A backslash escapes the next character;
// inside a class a leading "]" and POSIX classes such as [:alpha:] are
// literal parts of the class, as in pattern.CompileGlob.
func unbalancedGlob(p string) string {
	braces := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			j := i + 1
			if j < len(p) && (p[j] == '!' || p[j] == '^') {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			closed := false
			for ; j < len(p) && !closed; j++ {
				switch {
				case p[j] == '\\':
					j++
				case p[j] == '[' && j+1 < len(p) && p[j+1] == ':':
					if end := strings.Index(p[j:], ":]"); end >= 0 {
						j += end + 1
					}
				case p[j] == ']':
					closed = true
					j-- // the loop's j++ must leave j on the ']'
				}
			}
			if !closed {
				return `unclosed "[" (write \[ for a literal bracket)`
			}
			i = j
		case ']':
			return `unmatched "]"`
		case '{':
			braces++
		case '}':
			if braces == 0 {
				return `unmatched "}"`
			}
			braces--
		}
	}
	if braces > 0 {
		return `unclosed "{"`
	}
	return ""
}

// maxReviewerLen bounds a required reviewer id (bytes).
const maxReviewerLen = 128

// decodeReviewers decodes requiredReviewers: approver ids of 1..128
// characters with no whitespace or control character, each at most once.
// A duplicate is refused rather than dropped so the stored list is the one
// the operator wrote.
func decodeReviewers(m json.RawMessage) ([]string, error) {
	l, err := decodeStringList("requiredReviewers", m)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, id := range l {
		if msg := approverIDProblem(id, maxReviewerLen); msg != "" {
			return nil, fmt.Errorf("requiredReviewers: %q %s", id, msg)
		}
		if seen[id] {
			return nil, fmt.Errorf("requiredReviewers: %q is listed twice", id)
		}
		seen[id] = true
	}
	return l, nil
}

// approverIDProblem returns why id is not a usable approver or user id
// ("" when it is): empty, longer than max bytes, or containing whitespace
// or a control character (such an id could never equal the identity an
// approval is recorded under).
func approverIDProblem(id string, max int) string {
	if id == "" || len(id) > max {
		return fmt.Sprintf("must be 1..%d characters", max)
	}
	if strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "must not contain whitespace or control characters"
	}
	return ""
}

func isNull(m json.RawMessage) bool { return strings.TrimSpace(string(m)) == "null" }

// present reports whether at least one policy field is present.
func (p *contextPolicy) present() bool {
	return p.BranchRestrictions != nil || p.RequiredReviewers != nil || p.WaitTimerSeconds != nil ||
		p.HoldExpirySeconds != nil || p.MinimumTrust != nil || p.Enabled != nil || p.AllowLocalExecution != nil ||
		p.TriggerTypeFilters != nil || p.RepoPatterns != nil || p.AllowUntrusted != nil || p.ConcurrencyLimit != nil ||
		p.ConcurrencyStrategy != nil || p.ConcurrencyTimeoutMs != nil
}

func decodeStringList(field string, m json.RawMessage) ([]string, error) {
	var l []string
	if err := json.Unmarshal(m, &l); err != nil {
		return nil, fmt.Errorf("%s must be an array of strings", field)
	}
	if len(l) > maxContextListLen {
		return nil, fmt.Errorf("%s has more than %d entries", field, maxContextListLen)
	}
	for _, s := range l {
		if s == "" || len(s) > maxContextPatternLn {
			return nil, fmt.Errorf("%s entries must be 1..%d characters", field, maxContextPatternLn)
		}
	}
	return l, nil
}

func decodeSeconds(field string, m json.RawMessage, min int64) (*int64, error) {
	var n int64
	if err := json.Unmarshal(m, &n); err != nil || n < min || n > 365*24*3600 {
		return nil, fmt.Errorf("%s must be an integer ≥ %d (at most one year) or null", field, min)
	}
	return &n, nil
}

// decodeConcurrencyLimit decodes a context's concurrencyLimit: how many
// jobs of its concurrency group may be queued or running at once (KiCI
// contexts.concurrency_limit). 0 is refused rather than read as "no
// limit" (that is null) or "never run" (a disabled context does that).
func decodeConcurrencyLimit(m json.RawMessage) (*int64, error) {
	var n int64
	if err := json.Unmarshal(m, &n); err != nil || n < 1 || n > maxConcurrencyLimit {
		return nil, fmt.Errorf("concurrencyLimit must be an integer 1..%d or null", maxConcurrencyLimit)
	}
	return &n, nil
}

// decodeConcurrencyStrategy decodes a context's concurrencyStrategy, what a
// job that finds its concurrency group full does (KiCI
// contexts.concurrency_strategy): store.ConcurrencyQueue or
// store.ConcurrencyCancelPending.
func decodeConcurrencyStrategy(m json.RawMessage) (string, error) {
	var v string
	if err := json.Unmarshal(m, &v); err != nil || (v != store.ConcurrencyQueue && v != store.ConcurrencyCancelPending) {
		return "", fmt.Errorf("concurrencyStrategy must be %q, %q or null", store.ConcurrencyQueue, store.ConcurrencyCancelPending)
	}
	return v, nil
}

// decodeConcurrencyTimeoutMs decodes a context's concurrencyTimeoutMs, how
// long a job waits for a slot of its concurrency group, in milliseconds
// (KiCI contexts.concurrency_timeout_ms).
func decodeConcurrencyTimeoutMs(m json.RawMessage) (*int64, error) {
	var n int64
	if err := json.Unmarshal(m, &n); err != nil || n < minConcurrencyTimeoutMs || n > maxConcurrencyTimeoutMs {
		return nil, fmt.Errorf("concurrencyTimeoutMs must be an integer %d..%d (milliseconds) or null",
			minConcurrencyTimeoutMs, maxConcurrencyTimeoutMs)
	}
	return &n, nil
}

// patchField applies one PATCH field: absent (nil) leaves *dst alone, an
// explicit null sets the cleared value, anything else is decoded.
func patchField[T any](m json.RawMessage, dst *T, cleared T, decode func(json.RawMessage) (T, error)) error {
	if m == nil {
		return nil
	}
	if isNull(m) {
		*dst = cleared
		return nil
	}
	v, err := decode(m)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// apply sets the present fields of p on c; an explicit null clears a field
// (branch restrictions, trigger types and repo patterns become empty;
// enabled, allowLocalExecution and allowUntrusted take their defaults
// true, false and false; concurrencyStrategy becomes queue).
func (p *contextPolicy) apply(c *store.Context) error {
	if err := patchField(p.BranchRestrictions, &c.BranchRestrictions, []string{}, func(m json.RawMessage) ([]string, error) {
		return decodeStringList("branchRestrictions", m)
	}); err != nil {
		return err
	}
	if err := patchField(p.RequiredReviewers, &c.RequiredReviewers, nil, decodeReviewers); err != nil {
		return err
	}
	if err := patchField(p.WaitTimerSeconds, &c.WaitTimerSeconds, nil, func(m json.RawMessage) (*int64, error) {
		return decodeSeconds("waitTimerSeconds", m, 0)
	}); err != nil {
		return err
	}
	if err := patchField(p.HoldExpirySeconds, &c.HoldExpirySeconds, nil, func(m json.RawMessage) (*int64, error) {
		return decodeSeconds("holdExpirySeconds", m, 1)
	}); err != nil {
		return err
	}
	if err := patchField(p.MinimumTrust, &c.MinimumTrust, nil, func(m json.RawMessage) (*string, error) {
		var s string
		if err := json.Unmarshal(m, &s); err != nil || s != "trusted" {
			return nil, errors.New(`minimumTrust must be "trusted" or null`)
		}
		return &s, nil
	}); err != nil {
		return err
	}
	if err := patchField(p.ConcurrencyLimit, &c.ConcurrencyLimit, nil, decodeConcurrencyLimit); err != nil {
		return err
	}
	if err := patchField(p.ConcurrencyStrategy, &c.ConcurrencyStrategy, store.ConcurrencyQueue, decodeConcurrencyStrategy); err != nil {
		return err
	}
	if err := patchField(p.ConcurrencyTimeoutMs, &c.ConcurrencyTimeoutMs, nil, decodeConcurrencyTimeoutMs); err != nil {
		return err
	}
	if err := patchField(p.TriggerTypeFilters, &c.TriggerTypeFilters, []string{}, decodeTriggerTypes); err != nil {
		return err
	}
	if err := patchField(p.RepoPatterns, &c.RepoPatterns, []string{}, decodeRepoPatterns); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		m    json.RawMessage
		dst  *bool
		def  bool
	}{{"enabled", p.Enabled, &c.Enabled, true}, {"allowLocalExecution", p.AllowLocalExecution, &c.AllowLocalExecution, false},
		{"allowUntrusted", p.AllowUntrusted, &c.AllowUntrusted, false}} {
		if f.m == nil {
			continue
		}
		*f.dst = f.def
		if !isNull(f.m) {
			if err := json.Unmarshal(f.m, f.dst); err != nil {
				return fmt.Errorf("%s must be a boolean", f.name)
			}
		}
	}
	return nil
}

// contextOrgName validates the orgId query parameter and the {name} path
// value, answering 400 itself on failure.
func contextOrgName(w http.ResponseWriter, r *http.Request) (org, name string, ok bool) {
	org = r.URL.Query().Get("orgId")
	if org == "" {
		writeError(w, http.StatusBadRequest, "orgId required")
		return "", "", false
	}
	if !orgIDRe.MatchString(org) {
		writeError(w, http.StatusBadRequest, "invalid orgId")
		return "", "", false
	}
	name = r.PathValue("name")
	if !contextNameRe.MatchString(name) {
		writeError(w, http.StatusBadRequest, "invalid context name")
		return "", "", false
	}
	return org, name, true
}

func validOrgAndName(org, name string) string {
	if org == "" {
		return "orgId required"
	}
	if !orgIDRe.MatchString(org) {
		return "invalid orgId"
	}
	if !contextNameRe.MatchString(name) {
		return "name must match " + contextNameRe.String()
	}
	if name == "templates" {
		return `"templates" is a reserved context name`
	}
	return ""
}

// contextStoreErr maps a store error of a context route: ErrNotFound →
// 404 notFound, anything else → 500.
func (s *server) contextStoreErr(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, notFound)
		return
	}
	s.internalError(w, r, err)
}

func callerTokenID(r *http.Request) string {
	p, _ := auth.PrincipalFrom(r.Context())
	return p.TokenID
}

// createContext is POST /contexts: upsert keyed on (orgId, name); 201
// {envId, created:true} for a new context, 200 {envId, created:false}
// otherwise.
func (s *server) createContext(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OrgID       string `json:"orgId"`
		Name        string `json:"name"`
		Type        string `json:"type"`
		GlobPattern string `json:"globPattern"`
		contextPolicy
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if msg := validOrgAndName(body.OrgID, body.Name); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	c := &store.Context{OrgID: body.OrgID, Name: body.Name, Type: body.Type, GlobPattern: body.GlobPattern,
		Enabled: true, BranchRestrictions: []string{}, TriggerTypeFilters: []string{}, RepoPatterns: []string{}, CreatedBy: callerTokenID(r)}
	if c.Type == "" {
		c.Type = store.ContextTypeFixed
	}
	switch {
	case c.Type != store.ContextTypeFixed && c.Type != store.ContextTypeGlob:
		writeError(w, http.StatusBadRequest, `type must be "fixed" or "glob"`)
		return
	case c.Type == store.ContextTypeGlob && (c.GlobPattern == "" || len(c.GlobPattern) > maxContextPatternLn):
		writeError(w, http.StatusBadRequest, "globPattern is required for a glob context")
		return
	case c.Type == store.ContextTypeFixed && c.GlobPattern != "":
		writeError(w, http.StatusBadRequest, "globPattern is only allowed for a glob context")
		return
	}
	if c.Type == store.ContextTypeGlob {
		if err := globProblem(c.GlobPattern); err != nil {
			writeError(w, http.StatusBadRequest, "globPattern: "+err.Error())
			return
		}
	}
	if err := body.apply(c); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	created, err := s.d.Store.UpsertContext(r.Context(), c, nil)
	if errors.Is(err, store.ErrConflict) { // a concurrent create of the same name
		writeError(w, http.StatusConflict, "Conflict: resource already exists")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"envId": c.ID, "created": created})
}

// createContextTemplate is POST /contexts/templates: upserts a context named
// templateName (type fixed unless a glob type is asked for) and seeds its
// variables unlocked; 201 or 200 {envId, created, variablesSet}.
func (s *server) createContextTemplate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OrgID        string            `json:"orgId"`
		TemplateName string            `json:"templateName"`
		Type         string            `json:"type"`
		Variables    map[string]string `json:"variables"`
		contextPolicy
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if msg := validOrgAndName(body.OrgID, body.TemplateName); msg != "" {
		writeError(w, http.StatusBadRequest, strings.Replace(msg, "name", "templateName", 1))
		return
	}
	if body.Enabled != nil || body.AllowLocalExecution != nil {
		writeError(w, http.StatusBadRequest, "enabled and allowLocalExecution are not template fields")
		return
	}
	// KiCI never persists "template": the stored type is forced to glob or
	// fixed. A glob type needs a pattern this route has no field for, so
	// only fixed is stored.
	switch body.Type {
	case "", store.ContextTypeFixed, "template":
	default:
		writeError(w, http.StatusBadRequest, `type must be "fixed" or "template"`)
		return
	}
	if len(body.Variables) > 1000 {
		writeError(w, http.StatusBadRequest, "at most 1000 variables")
		return
	}
	for k, v := range body.Variables {
		if !varKeyRe.MatchString(k) || len(v) > maxVariableValueLen {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid variable %q (key must match %s, value ≤ %d bytes)", k, varKeyRe, maxVariableValueLen))
			return
		}
	}
	c := &store.Context{OrgID: body.OrgID, Name: body.TemplateName, Type: store.ContextTypeFixed, Enabled: true,
		BranchRestrictions: []string{}, TriggerTypeFilters: []string{}, RepoPatterns: []string{}, CreatedBy: callerTokenID(r)}
	if err := body.apply(c); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	created, err := s.d.Store.UpsertContext(r.Context(), c, body.Variables)
	if errors.Is(err, store.ErrConflict) { // a concurrent create of the same name
		writeError(w, http.StatusConflict, "Conflict: resource already exists")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"envId": c.ID, "created": created, "variablesSet": len(body.Variables)})
}

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
	writeJSON(w, status, map[string]any{"created": created})
}

// maxBindingPatternLen bounds a binding's scope and host patterns (bytes).
const maxBindingPatternLen = 255

var (
	// scopePlaceholderRe matches the agent placeholders a scope pattern may
	// hold (ctxgate.ScopeGranted substitutes them at dispatch).
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
	if err := globProblem(body); err != nil {
		return err.Error()
	}
	return ""
}

// hostPatternProblem returns why p is not a valid binding host pattern
// ("" when it is), following ctxgate.HostMatches: "*" or "**" (any
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
		_, isRegex, err := ctxgate.HostRegex(p)
		if !isRegex {
			return fmt.Sprintf("%q: a regular expression is written /source/ or /source/i", p)
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	if err := globProblem(p); err != nil {
		return err.Error()
	}
	return ""
}

// patchContextPolicy is PATCH /contexts/{name}/policy: only the fields
// present change, an explicit null clears one; 400 when none is given.
func (s *server) patchContextPolicy(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OrgID       string `json:"orgId"`
		ContextName string `json:"contextName"`
		contextPolicy
	}
	if !decodeBody(w, r, &body) {
		return
	}
	name := r.PathValue("name")
	if msg := validOrgAndName(body.OrgID, name); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if body.ContextName != "" && body.ContextName != name {
		writeError(w, http.StatusBadRequest, "contextName does not match the path")
		return
	}
	if !body.present() {
		writeError(w, http.StatusBadRequest, "No policy fields to update")
		return
	}
	var invalid error
	err := s.d.Store.UpdateContextPolicy(r.Context(), body.OrgID, name, func(c *store.Context) error {
		invalid = body.apply(c)
		return invalid
	})
	if invalid != nil {
		writeError(w, http.StatusBadRequest, invalid.Error())
		return
	}
	if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"updated": true})
}

// listContexts is GET /contexts?orgId=[&includeSecrets=true]: {contexts:[row…]}
// ordered by name, each row an apitypes.Context; with includeSecrets each
// row also gets secretKeys (apitypes.ContextWithSecretKeys).
func (s *server) listContexts(w http.ResponseWriter, r *http.Request) {
	org := r.URL.Query().Get("orgId")
	if org == "" {
		writeError(w, http.StatusBadRequest, "orgId required")
		return
	}
	list, err := s.d.Store.ListContexts(r.Context(), org)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	includeSecrets := false
	switch r.URL.Query().Get("includeSecrets") {
	case "", "false":
	case "true":
		includeSecrets = true
	default:
		writeError(w, http.StatusBadRequest, "includeSecrets must be true or false")
		return
	}
	// Without includeSecrets a row has no secretKeys field at all (not an
	// empty list, which would claim the bound scopes hold no keys).
	rows := make([]any, 0, len(list))
	for _, c := range list {
		if !includeSecrets {
			rows = append(rows, contextView(c))
			continue
		}
		keys, err := s.contextSecretKeys(r, c)
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		rows = append(rows, apitypes.ContextWithSecretKeys{Context: contextView(c), SecretKeys: keys})
	}
	writeJSON(w, http.StatusOK, map[string]any{"contexts": rows})
}

// contextSecretKeys returns the distinct secret key names (never values) of
// the scopes equal to one of c's binding patterns, sorted. As in KiCI the
// match is exact: a glob pattern is not expanded here.
func (s *server) contextSecretKeys(r *http.Request, c *store.Context) ([]string, error) {
	bs, err := s.d.Store.ListContextBindings(r.Context(), c.OrgID, c.Name)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	keys := []string{}
	for _, b := range bs {
		ks, err := s.d.Store.ListSecretKeys(r.Context(), c.OrgID, b.ScopePattern)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// getContext is GET /contexts/{name}?orgId=: {context, variables, bindings}.
func (s *server) getContext(w http.ResponseWriter, r *http.Request) {
	org, name, ok := contextOrgName(w, r)
	if !ok {
		return
	}
	c, err := s.d.Store.GetContext(r.Context(), org, name)
	if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	vars, err := s.d.Store.ListContextVariables(r.Context(), org, name)
	if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	bs, err := s.d.Store.ListContextBindings(r.Context(), org, name)
	if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ContextDetail{Context: contextView(c), Variables: variableViews(vars), Bindings: bindingViews(bs)})
}

// deleteContext is DELETE /contexts/{name}?orgId=: {deleted:true}; bindings,
// variables and source overrides cascade. While pending holds name the
// context it answers 409 {error, errorCode:"pending_held_runs"} and deletes
// nothing (a hold must never lose the policy it waits on).
func (s *server) deleteContext(w http.ResponseWriter, r *http.Request) {
	org, name, ok := contextOrgName(w, r)
	if !ok {
		return
	}
	if err := s.d.Store.DeleteContext(r.Context(), org, name); store.IsPendingHeldRuns(err) {
		writeJSON(w, http.StatusConflict, map[string]string{"error": pendingHeldRunsMsg(err, org), "errorCode": "pending_held_runs"})
		return
	} else if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
}

// pendingHeldRunsMsg is the 409 message of a context delete blocked by
// pending holds: how many there are and how to clear them.
func pendingHeldRunsMsg(err error, org string) string {
	var e *store.PendingHeldRunsError
	if !errors.As(err, &e) {
		return err.Error()
	}
	return fmt.Sprintf("Context has %d pending held run(s) — approve or reject them first, or cancel their runs (kici-admin held-run list --org %s)", e.Count, org)
}

// listContextVariables is GET /contexts/{name}/variables?orgId=.
func (s *server) listContextVariables(w http.ResponseWriter, r *http.Request) {
	org, name, ok := contextOrgName(w, r)
	if !ok {
		return
	}
	vars, err := s.d.Store.ListContextVariables(r.Context(), org, name)
	if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ContextVariableList{Variables: variableViews(vars)})
}

// putContextVariable is PUT /contexts/{name}/variables/{key}?orgId= with
// {value, locked?}: {set:true}.
func (s *server) putContextVariable(w http.ResponseWriter, r *http.Request) {
	org, name, ok := contextOrgName(w, r)
	if !ok {
		return
	}
	var body struct {
		Value  *string `json:"value"`
		Locked bool    `json:"locked"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	key, ok := variableKey(w, r)
	if !ok {
		return
	}
	if msg := valueProblem(body.Value); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if err := s.d.Store.PutContextVariable(r.Context(), org, name, &store.ContextVariable{Key: key, Value: *body.Value, Locked: body.Locked}); err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"set": true})
}

// deleteContextVariable is DELETE /contexts/{name}/variables/{key}?orgId=.
func (s *server) deleteContextVariable(w http.ResponseWriter, r *http.Request) {
	org, name, ok := contextOrgName(w, r)
	if !ok {
		return
	}
	key, ok := variableKey(w, r)
	if !ok {
		return
	}
	if err := s.d.Store.DeleteContextVariable(r.Context(), org, name, key); err != nil {
		s.contextStoreErr(w, r, err, "Context or variable not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
}

// variableKey reads and checks the {key} path value of a variable or
// source-override route, answering 400 itself.
func variableKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	key := r.PathValue("key")
	if !varKeyRe.MatchString(key) {
		writeError(w, http.StatusBadRequest, "variable key must match "+varKeyRe.String())
		return "", false
	}
	return key, true
}

// valueProblem returns why a variable or source-override value is not
// acceptable ("" when it is): missing, or longer than maxVariableValueLen.
func valueProblem(v *string) string {
	switch {
	case v == nil:
		return "value is required"
	case len(*v) > maxVariableValueLen:
		return fmt.Sprintf("value is too long: %d bytes, at most %d", len(*v), maxVariableValueLen)
	}
	return ""
}

// routingKeyRe bounds a source override's routing key (a source's routing
// key, e.g. "generic:acme:<id>").
var routingKeyRe = regexp.MustCompile(`^[^\s\x00-\x1f\x7f]{1,255}$`)

// overrideParams validates orgId, {name}, routingKey (required unless
// optional) and, when withKey, the {key} path value; it answers 400 itself.
func overrideParams(w http.ResponseWriter, r *http.Request, optional, withKey bool) (org, name, rk, key string, ok bool) {
	if org, name, ok = contextOrgName(w, r); !ok {
		return "", "", "", "", false
	}
	rk = r.URL.Query().Get("routingKey")
	switch {
	case rk == "" && !optional:
		writeError(w, http.StatusBadRequest, "routingKey required")
		return "", "", "", "", false
	case rk != "" && !routingKeyRe.MatchString(rk):
		writeError(w, http.StatusBadRequest, "invalid routingKey")
		return "", "", "", "", false
	}
	if withKey {
		if key, ok = variableKey(w, r); !ok {
			return "", "", "", "", false
		}
	}
	return org, name, rk, key, true
}

// listContextSourceOverrides is GET /contexts/{name}/source-overrides?orgId=
// [&routingKey=]: {overrides:[{routingKey,key,value,updatedAt}…]} ordered
// by routing key then key. A source override replaces an unlocked variable
// of the context for runs of that source (kici's route; KiCI only has the
// store methods).
func (s *server) listContextSourceOverrides(w http.ResponseWriter, r *http.Request) {
	org, name, rk, _, ok := overrideParams(w, r, true, false)
	if !ok {
		return
	}
	list, err := s.d.Store.ListContextSourceOverrides(r.Context(), org, name, rk)
	if err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ContextSourceOverrideList{Overrides: overrideViews(list)})
}

// putContextSourceOverride is PUT /contexts/{name}/source-overrides/{key}
// ?orgId=&routingKey= with {value}: {set:true} (upsert).
func (s *server) putContextSourceOverride(w http.ResponseWriter, r *http.Request) {
	org, name, rk, key, ok := overrideParams(w, r, false, true)
	if !ok {
		return
	}
	var body struct {
		Value *string `json:"value"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if msg := valueProblem(body.Value); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if err := s.d.Store.PutContextSourceOverride(r.Context(), org, name, &store.ContextSourceOverride{RoutingKey: rk, Key: key, Value: *body.Value}); err != nil {
		s.contextStoreErr(w, r, err, "Context not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"set": true})
}

// deleteContextSourceOverride is DELETE /contexts/{name}/source-overrides/
// {key}?orgId=&routingKey=: {deleted:true}; 404 when the context or the
// override is unknown.
func (s *server) deleteContextSourceOverride(w http.ResponseWriter, r *http.Request) {
	org, name, rk, key, ok := overrideParams(w, r, false, true)
	if !ok {
		return
	}
	if err := s.d.Store.DeleteContextSourceOverride(r.Context(), org, name, rk, key); err != nil {
		s.contextStoreErr(w, r, err, "Context or source override not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
}
