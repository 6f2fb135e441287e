package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger/pattern"
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
		if err := pattern.ValidateGlob(p); err != nil {
			return nil, fmt.Errorf("repoPatterns: %v", err)
		}
	}
	return l, nil
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
	writeJSON(w, http.StatusOK, apitypes.Updated{Updated: true})
}
