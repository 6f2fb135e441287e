package apitypes

import "time"

// Concurrency strategies a context's concurrencyStrategy takes (KiCI
// contexts.concurrency_strategy).
const (
	// ConcurrencyQueue: a job that finds its group full waits its turn.
	ConcurrencyQueue = "queue"
	// ConcurrencyCancelPending: it waits too, but cancels the group's jobs
	// of older runs already waiting, so only the newest run's job waits.
	ConcurrencyCancelPending = "cancel-pending"
)

// ContextType is how a context is matched to the names jobs ask for (KiCI
// contexts.type).
type ContextType string

// Context types (KiCI contexts.type).
const (
	// ContextTypeFixed is a context matched by its exact name.
	ContextTypeFixed ContextType = "fixed"
	// ContextTypeGlob is a context whose GlobPattern matches the names jobs ask for.
	ContextTypeGlob ContextType = "glob"
)

// DefaultConcurrencyTimeoutMs is how long a job waits for a concurrency slot
// when its context sets no concurrencyTimeoutMs: 1 800 000 ms = 30 minutes
// (KiCI's default).
const DefaultConcurrencyTimeoutMs = 30 * 60 * 1000

// Context is one context as GET /contexts and GET /contexts/{name} return it
// (KiCI contexts, camelCase). Lists are never null; nil pointers are JSON
// null and mean "not set" (the field's doc says what that implies).
type Context struct {
	ID    string `json:"id"`
	OrgID string `json:"orgId"`
	Name  string `json:"name"`
	// Type is ContextTypeFixed or ContextTypeGlob.
	Type ContextType `json:"type"`
	// GlobPattern is the name pattern of a glob context ("" for fixed).
	GlobPattern string `json:"globPattern"`
	Enabled     bool   `json:"enabled"`
	// BranchRestrictions are branch globs a run's target branch must match
	// (empty = any branch).
	BranchRestrictions []string `json:"branchRestrictions"`
	// RequiredReviewers lists reviewers whose approval holds a job; null =
	// no approval required.
	RequiredReviewers []string `json:"requiredReviewers" nullable:"true"`
	// WaitTimerSeconds delays dispatch, in seconds; null = no timer.
	WaitTimerSeconds *int64 `json:"waitTimerSeconds"`
	// HoldExpirySeconds bounds how long a hold waits, in seconds; null =
	// the default, 3600.
	HoldExpirySeconds *int64 `json:"holdExpirySeconds"`
	// MinimumTrust is "trusted" or null.
	MinimumTrust        *string `json:"minimumTrust"`
	AllowLocalExecution bool    `json:"allowLocalExecution"`
	// TriggerTypeFilters are the trigger types a run must come from
	// (empty = any).
	TriggerTypeFilters []string `json:"triggerTypeFilters"`
	// RepoPatterns are "owner/name" globs the run's repository must match
	// (empty = any; "!" negates).
	RepoPatterns []string `json:"repoPatterns"`
	// ConcurrencyLimit caps the jobs of the context's concurrency group
	// queued or running at once across the org; null = no limit.
	ConcurrencyLimit *int64 `json:"concurrencyLimit"`
	// ConcurrencyStrategy is ConcurrencyQueue or ConcurrencyCancelPending.
	ConcurrencyStrategy string `json:"concurrencyStrategy"`
	// ConcurrencyTimeoutMs bounds the wait for a slot, in milliseconds;
	// null = DefaultConcurrencyTimeoutMs.
	ConcurrencyTimeoutMs *int64 `json:"concurrencyTimeoutMs"`
	// AllowUntrusted lets runs of trust tier "unknown" (fork pull
	// requests) receive this context's secrets (kici's addition).
	AllowUntrusted bool      `json:"allowUntrusted"`
	CreatedBy      string    `json:"createdBy"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// ContextWithSecretKeys is a row of GET /contexts: the context, plus, with
// ?includeSecrets=true only, the distinct key names (never values) of the
// secret scopes equal to one of its binding patterns, sorted. Without
// includeSecrets SecretKeys is nil and absent (not an empty list, which
// would claim the bound scopes hold no keys).
type ContextWithSecretKeys struct {
	Context
	SecretKeys []string `json:"secretKeys,omitzero"`
}

// ContextList is the body of GET /contexts.
type ContextList struct {
	Contexts []ContextWithSecretKeys `json:"contexts"`
}

// ContextBinding binds a context to the secret scopes matching ScopePattern
// on agents matching HostPattern (KiCI context_bindings).
type ContextBinding struct {
	ScopePattern string    `json:"scopePattern"`
	HostPattern  string    `json:"hostPattern"`
	CreatedAt    time.Time `json:"createdAt"`
}

// ContextVariable is one org-level variable of a context (KiCI
// context_variables); a Locked variable is never overridden per source.
type ContextVariable struct {
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Locked    bool      `json:"locked"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// ContextDetail is the body of GET /contexts/{name}.
type ContextDetail struct {
	Context   Context           `json:"context"`
	Variables []ContextVariable `json:"variables"`
	Bindings  []ContextBinding  `json:"bindings"`
}

// ContextVariableList is the body of GET /contexts/{name}/variables.
type ContextVariableList struct {
	Variables []ContextVariable `json:"variables"`
}

// ContextSourceOverride replaces a context variable for the runs of one
// source (by routing key) unless the variable is locked.
type ContextSourceOverride struct {
	RoutingKey string    `json:"routingKey"`
	Key        string    `json:"key"`
	Value      string    `json:"value"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// ContextSourceOverrideList is the body of GET /contexts/{name}/source-overrides.
type ContextSourceOverrideList struct {
	Overrides []ContextSourceOverride `json:"overrides"`
}

// ContextCreated is the body of POST /contexts, an upsert: EnvID is the
// context's id (KiCI's name for it), Created true with HTTP 201 for a new
// context, false with 200 when an existing one was updated.
type ContextCreated struct {
	EnvID   string `json:"envId"`
	Created bool   `json:"created"`
}

// ContextTemplateCreated is the body of POST /contexts/templates: the
// upsert's answer plus VariablesSet, how many variables the template
// seeded.
type ContextTemplateCreated struct {
	ContextCreated
	VariablesSet int `json:"variablesSet"`
}
