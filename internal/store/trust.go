package store

import (
	"context"
	"time"
)

// Fork policies (KiCI ForkPolicy) for pull requests from forks.
const (
	ForkIgnore = "ignore" // drop the event: no run
	ForkHold   = "hold"   // create the run held until approved (kici's default)
	ForkAllow  = "allow"  // run with reduced privilege
)

// Trust tiers of a run (KiCI trust tiers; the "known" tier is retired).
const (
	TrustTrusted = "trusted" // a same-repository ref
	TrustUnknown = "unknown" // a pull request from a fork
)

// CI trust levels of a directory member (KiCI memberCiTrustLevels).
const (
	CITrustNone  = "none"
	CITrustRead  = "read"
	CITrustWrite = "write"
	CITrustAdmin = "admin"
)

// TrustPolicy is an org's fork policy (KiCI org_trust_policy).
type TrustPolicy struct {
	OrgID      string `json:"customerId"`
	ForkPolicy string `json:"forkPolicy"`
	// ApprovalExpirySeconds bounds how long a fork hold waits.
	ApprovalExpirySeconds int64     `json:"approvalExpirySeconds"`
	Source                string    `json:"source"` // "local"
	UpdatedAt             time.Time `json:"updatedAt"`
}

// DirectoryMember is one member of an org's approval directory (KiCI trust
// directory): an identity link (Provider, ProviderUserID immutable id,
// ProviderUsername display) mapped to UserID with a CI trust level.
type DirectoryMember struct {
	OrgID            string    `json:"customerId"`
	UserID           string    `json:"userId"`
	Provider         string    `json:"provider"`
	ProviderUsername string    `json:"providerUsername"`
	ProviderUserID   string    `json:"providerUserId"`
	CITrust          string    `json:"ciTrust"`
	UpdatedAt        time.Time `json:"updatedAt"`
}

// TrustStore persists trust policies and approval directories. Every write
// commits with its access-log row in one transaction, serialised per org,
// so a loosened policy never lands unaudited (KiCI trust-policy audit
// requirement).
type TrustStore interface {
	// GetTrustPolicy returns org's stored policy, or ErrNotFound (the
	// defaults apply).
	GetTrustPolicy(ctx context.Context, orgID string) (*TrustPolicy, error)
	// UpdateTrustPolicyAudited reads org's policy (def when none is stored),
	// calls mutate on a copy, stores the result with audit, in one
	// transaction serialised per org; it returns the stored policy. An
	// error from mutate is returned as is and changes nothing.
	UpdateTrustPolicyAudited(ctx context.Context, orgID string, def TrustPolicy, mutate func(p *TrustPolicy) error, audit *AccessLogEntry) (*TrustPolicy, error)
	// ListDirectoryMembers returns org's directory ordered by user id.
	ListDirectoryMembers(ctx context.Context, orgID string) ([]*DirectoryMember, error)
	// PutDirectoryMemberAudited stores m, first deleting the org's members
	// with the same user id or the same (provider, provider user id), with
	// audit, in one transaction.
	PutDirectoryMemberAudited(ctx context.Context, m *DirectoryMember, audit *AccessLogEntry) error
	// DeleteDirectoryMemberAudited deletes every link of userID in org with
	// audit; it reports whether anything was removed (no audit row then).
	DeleteDirectoryMemberAudited(ctx context.Context, orgID, userID string, audit *AccessLogEntry) (bool, error)
	// FindDirectoryMember returns the member of org linked to (provider,
	// providerUserID), or ErrNotFound.
	FindDirectoryMember(ctx context.Context, orgID, provider, providerUserID string) (*DirectoryMember, error)
}
