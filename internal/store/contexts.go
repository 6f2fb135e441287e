package store

import (
	"context"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// ContextStore persists contexts (formerly "environments"): named policy
// and variable sets that jobs bind to, their secret-scope bindings and
// their org-level variables (KiCI contexts, context_bindings,
// context_variables; orchestrator 0.2.0 admin-contexts routes). A context
// is unique per (OrgID, Name); deleting one cascades to its bindings,
// variables and source overrides.
type ContextStore interface {
	// UpsertContext inserts c keyed on (c.OrgID, c.Name), or replaces every
	// field but ID, CreatedBy and CreatedAt of the existing row. vars (may
	// be nil) are upserted as unlocked variables in the same transaction.
	// It sets c.ID (and the timestamps) and reports whether a new row was
	// created.
	UpsertContext(ctx context.Context, c *Context, vars map[string]string) (created bool, err error)
	// GetContext returns the context name of org, or ErrNotFound.
	GetContext(ctx context.Context, orgID, name string) (*Context, error)
	// ListContexts returns the contexts of org ordered by name.
	ListContexts(ctx context.Context, orgID string) ([]*Context, error)
	// UpdateContextPolicy reads context name of org, calls mutate on it and
	// stores its policy fields (every field but ID, OrgID, Name, Type,
	// GlobPattern, CreatedBy, CreatedAt), all in one transaction so that
	// concurrent updates of different fields do not lose each other.
	// ErrNotFound if the context does not exist; an error from mutate is
	// returned as is and changes nothing.
	UpdateContextPolicy(ctx context.Context, orgID, name string, mutate func(c *Context) error) error
	// DeleteContext deletes a context with its bindings, variables and
	// source overrides; ErrNotFound if it does not exist; a
	// *PendingHeldRunsError (nothing deleted) while pending holds name it.
	// The check and the delete happen in one transaction.
	DeleteContext(ctx context.Context, orgID, name string) error

	// BindContext adds a (scopePattern, hostPattern) binding to context
	// name of org. It reports false when an identical binding already
	// exists; ErrNotFound when the context does not.
	BindContext(ctx context.Context, orgID, name, scopePattern, hostPattern string) (created bool, err error)
	// ListContextBindings returns the bindings of context name of org in
	// creation order; ErrNotFound if the context does not exist.
	ListContextBindings(ctx context.Context, orgID, name string) ([]*ContextBinding, error)

	// ListContextVariables returns the variables of context name of org
	// ordered by key; ErrNotFound if the context does not exist.
	ListContextVariables(ctx context.Context, orgID, name string) ([]*ContextVariable, error)
	// PutContextVariable inserts or replaces one variable; ErrNotFound if
	// the context does not exist.
	PutContextVariable(ctx context.Context, orgID, name string, v *ContextVariable) error
	// DeleteContextVariable deletes one variable; ErrNotFound if the
	// context or the variable does not exist.
	DeleteContextVariable(ctx context.Context, orgID, name, key string) error

	// ListContextSourceOverrides returns the source overrides of context
	// name of org for routingKey ("" = every routing key), ordered by
	// routing key then key; ErrNotFound if the context does not exist.
	ListContextSourceOverrides(ctx context.Context, orgID, name, routingKey string) ([]*ContextSourceOverride, error)
	// PutContextSourceOverride inserts or replaces one override;
	// ErrNotFound if the context does not exist.
	PutContextSourceOverride(ctx context.Context, orgID, name string, o *ContextSourceOverride) error
	// DeleteContextSourceOverride deletes one override; ErrNotFound if the
	// context or the override does not exist.
	DeleteContextSourceOverride(ctx context.Context, orgID, name, routingKey, key string) error

	// AcquireContextSlots takes for job jobID a slot of every concurrency
	// group in limits (group → limit) of org, all or none: it reports true
	// only when, in every group, the job already holds a slot or fewer
	// than the limit are held, and then holds one in each; false changes
	// nothing. Atomic: two concurrent callers never both take the last
	// slot of a group. A slot counts until its job is terminal (also while
	// the job is held: the gate only gives slots to jobs about to be
	// queued). Slots of terminal jobs may be deleted on the way.
	AcquireContextSlots(ctx context.Context, orgID, jobID string, limits map[string]int, at time.Time) (bool, error)
	// ContextSlotRuns returns the ids of the runs whose jobs hold a slot of
	// concurrency group grp of org (jobs not yet terminal), each once, in
	// the order they took their first slot; a held job's reason names them.
	ContextSlotRuns(ctx context.Context, orgID, grp string) ([]string, error)
}

// ContextSourceOverride replaces a context variable for the runs of one
// source (context_source_overrides); the admin API serves it as it is.
type ContextSourceOverride = apitypes.ContextSourceOverride

// Concurrency strategies (KiCI contexts.concurrency_strategy).
const (
	ConcurrencyQueue         = "queue"
	ConcurrencyCancelPending = "cancel-pending"
)

// ContextType is how a context is matched (KiCI contexts.type); apitypes',
// as the admin API serves it.
type ContextType = apitypes.ContextType

// Context types (KiCI contexts.type), apitypes' constants. "template" is
// accepted by the CLI but never stored.
const (
	ContextTypeFixed = apitypes.ContextTypeFixed
	ContextTypeGlob  = apitypes.ContextTypeGlob
)

// Context is one context row (contexts); the admin API serves it as it
// is, in camelCase. The store keeps BranchRestrictions, TriggerTypeFilters
// and RepoPatterns non-nil.
type Context = apitypes.Context

// ContextBinding binds a context to secret scopes matching ScopePattern
// on agents matching HostPattern (context_bindings); the admin API serves
// it as it is.
type ContextBinding = apitypes.ContextBinding

// ContextVariable is one org-level variable of a context
// (context_variables); the admin API serves it as it is.
type ContextVariable = apitypes.ContextVariable
