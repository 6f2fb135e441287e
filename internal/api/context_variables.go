package api

import (
	"fmt"
	"net/http"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/boundedre"
	"kici.dev/kici/internal/store"
)

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
	writeJSON(w, http.StatusOK, apitypes.ContextVariableList{Variables: derefAll(vars)})
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
	writeJSON(w, http.StatusOK, apitypes.Set{Set: true})
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
	writeJSON(w, http.StatusOK, apitypes.Deleted{Deleted: true})
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
var routingKeyRe = boundedre.MustCompile(`^[^\s\x00-\x1f\x7f]{1,255}$`, 1, 255)

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
	writeJSON(w, http.StatusOK, apitypes.ContextSourceOverrideList{Overrides: derefAll(list)})
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
	writeJSON(w, http.StatusOK, apitypes.Set{Set: true})
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
	writeJSON(w, http.StatusOK, apitypes.Deleted{Deleted: true})
}
