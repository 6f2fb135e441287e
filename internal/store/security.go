package store

import (
	"context"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// SecurityStore holds the operator's security state: routing-key scopes of
// admin tokens, audited token creation and revocation, encrypted secrets
// and the access log (see docs/kici-compatibility.md#admin-api).
// Every *Audited method writes its AccessLogEntry in the same
// transaction as the change, so a change never exists without its audit row.
type SecurityStore interface {
	// CreateAdminTokenAudited inserts t with its routing-key scope ("" =
	// unscoped) and the audit row in one transaction.
	CreateAdminTokenAudited(ctx context.Context, t *AdminToken, routingKey string, audit *AccessLogEntry) error
	// AdminTokenRoutingKey returns the routing-key scope of token id ("" =
	// unscoped), or ErrNotFound.
	AdminTokenRoutingKey(ctx context.Context, id string) (string, error)
	// ListAdminTokenRoutingKeys returns the scope of every scoped token by id.
	ListAdminTokenRoutingKeys(ctx context.Context) (map[string]string, error)
	// RevokeAdminTokenAudited marks token id revoked with its audit row;
	// reports whether a live token was revoked (false for unknown or
	// already revoked ids, in which case no audit row is written).
	RevokeAdminTokenAudited(ctx context.Context, id string, audit *AccessLogEntry) (bool, error)

	// CreateAgentTokenAudited inserts an agent token and its audit row.
	CreateAgentTokenAudited(ctx context.Context, t *AgentToken, audit *AccessLogEntry) error
	// AgentTokenMandatoryLabels returns the mandatory labels of agent token
	// id (nil = none), or ErrNotFound.
	AgentTokenMandatoryLabels(ctx context.Context, id string) ([]string, error)
	// RevokeAgentTokenAudited sets revoked_at on a live token with its audit
	// row; ErrNotFound when the id is unknown or already revoked.
	RevokeAgentTokenAudited(ctx context.Context, id string, at time.Time, audit *AccessLogEntry) error

	// ListSecretScopes returns the scope names of org, sorted.
	ListSecretScopes(ctx context.Context, orgID string) ([]string, error)
	// CreateSecretScope creates an empty scope; ErrConflict if it exists.
	CreateSecretScope(ctx context.Context, orgID, scope string, audit *AccessLogEntry) error
	// DeleteSecretScope deletes a scope and all its secrets; ErrNotFound if
	// the scope does not exist.
	DeleteSecretScope(ctx context.Context, orgID, scope string, audit *AccessLogEntry) error
	// ListSecretKeys returns the key names of a scope, sorted; ErrNotFound
	// if the scope does not exist.
	ListSecretKeys(ctx context.Context, orgID, scope string) ([]string, error)
	// PutSecret inserts or replaces one sealed secret, creating its scope
	// when missing.
	PutSecret(ctx context.Context, s *SealedSecret, audit *AccessLogEntry) error
	// DeleteSecret deletes one secret; ErrNotFound if it does not exist.
	DeleteSecret(ctx context.Context, orgID, scope, key string, audit *AccessLogEntry) error
	// GetSecret returns one sealed secret, or ErrNotFound.
	GetSecret(ctx context.Context, orgID, scope, key string) (*SealedSecret, error)
	// ListSealedValues returns every value sealed under the master key
	// (secrets and provenance signing keys).
	ListSealedValues(ctx context.Context) ([]*SealedValue, error)
	// ResealAll re-encrypts every sealed value with reseal in one
	// transaction, writes audit, and returns how many values of each kind
	// were rewritten. Any reseal error rolls everything back.
	ResealAll(ctx context.Context, reseal func(v *SealedValue) ([]byte, error), audit *AccessLogEntry) (map[string]int, error)

	// AppendAccessLog records one access-log entry on its own.
	AppendAccessLog(ctx context.Context, e *AccessLogEntry) error
	// ListAccessLog returns entries matching f, newest first.
	ListAccessLog(ctx context.Context, f AccessLogFilter) ([]*AccessLogEntry, error)
}

// SealedSecret is one encrypted secret value (KiCI scoped_secrets). The
// ciphertext is AES-256-GCM under the master key with AAD
// "<orgId>:<scope>:<key>".
type SealedSecret struct {
	OrgID      string
	Scope      string
	Key        string
	Ciphertext []byte
	UpdatedAt  time.Time
}

// Kinds of SealedValue.
const (
	SealedKindSecret     = "secret"
	SealedKindSigningKey = "signing_key"
)

// SealedValue is one value sealed under the master key, as seen by a
// master-key rotation. Kind says which table it lives in; for secrets OrgID,
// Scope and Key identify it, for signing keys Kid does.
type SealedValue struct {
	Kind       string
	OrgID      string
	Scope      string
	Key        string
	Kid        string
	Ciphertext []byte
}

// AccessLogEntry is one access-log row (access_log); the admin API
// serves it as it is.
type AccessLogEntry = apitypes.AccessLogEntry

// AccessLogFilter selects access-log entries. Empty fields do not filter;
// Limit defaults to 100 (max 1000).
type AccessLogFilter struct {
	Action     string
	TokenID    string
	RoutingKey string
	Since      *time.Time
	Limit      int
	Offset     int
}
