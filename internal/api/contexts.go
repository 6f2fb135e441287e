package api

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/boundedre"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger/pattern"
)

var (
	contextNameRe = boundedre.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, 1, 128)
	orgIDRe       = boundedre.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, 1, 128)
	varKeyRe      = boundedre.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`, 1, 256)
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
	c := &store.Context{OrgID: body.OrgID, Name: body.Name, Type: store.ContextType(body.Type), GlobPattern: body.GlobPattern,
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
		if err := pattern.ValidateGlob(c.GlobPattern); err != nil {
			writeError(w, http.StatusBadRequest, "globPattern: "+err.Error())
			return
		}
	}
	status, ok := s.upsertContext(w, r, c, &body.contextPolicy, nil)
	if !ok {
		return
	}
	writeJSON(w, status, apitypes.ContextCreated{EnvID: c.ID, Created: status == http.StatusCreated})
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
	case "", string(store.ContextTypeFixed), "template":
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
	status, ok := s.upsertContext(w, r, c, &body.contextPolicy, body.Variables)
	if !ok {
		return
	}
	writeJSON(w, status, apitypes.ContextTemplateCreated{ContextCreated: apitypes.ContextCreated{EnvID: c.ID, Created: status == http.StatusCreated}, VariablesSet: len(body.Variables)})
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
	rows := make([]apitypes.ContextWithSecretKeys, 0, len(list))
	for _, c := range list {
		if !includeSecrets {
			rows = append(rows, apitypes.ContextWithSecretKeys{Context: *c})
			continue
		}
		keys, err := s.contextSecretKeys(r, c)
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		rows = append(rows, apitypes.ContextWithSecretKeys{Context: *c, SecretKeys: keys})
	}
	writeJSON(w, http.StatusOK, apitypes.ContextList{Contexts: rows})
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
	writeJSON(w, http.StatusOK, apitypes.ContextDetail{Context: *c, Variables: derefAll(vars), Bindings: derefAll(bs)})
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
	writeJSON(w, http.StatusOK, apitypes.Deleted{Deleted: true})
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

// upsertContext applies a create request's policy fields to c and stores it
// with vars, answering 400 for a policy it refuses, 409 when a concurrent
// create took the name and 500 when the store fails. On success it returns
// the status to answer: 201 when c is new, 200 when it replaced one.
func (s *server) upsertContext(w http.ResponseWriter, r *http.Request, c *store.Context, policy *contextPolicy, vars map[string]string) (int, bool) {
	if err := policy.apply(c); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return 0, false
	}
	created, err := s.d.Store.UpsertContext(r.Context(), c, vars)
	if errors.Is(err, store.ErrConflict) { // a concurrent create of the same name
		writeError(w, http.StatusConflict, "Conflict: resource already exists")
		return 0, false
	} else if err != nil {
		s.internalError(w, r, err)
		return 0, false
	}
	if created {
		return http.StatusCreated, true
	}
	return http.StatusOK, true
}
