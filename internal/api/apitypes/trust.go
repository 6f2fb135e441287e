package apitypes

import "time"

// TrustPolicyView is the policy object of the trust-policy routes.
// Source and UpdatedAt are null while no row is stored (EffectiveDefault
// true: kici's defaults are in force).
type TrustPolicyView struct {
	CustomerID            string     `json:"customerId"`
	ForkPolicy            string     `json:"forkPolicy"`
	ApprovalExpiryHours   int64      `json:"approvalExpiryHours"`
	ApprovalExpirySeconds int64      `json:"approvalExpirySeconds"`
	Source                *string    `json:"source"`
	UpdatedAt             *time.Time `json:"updatedAt"`
	EffectiveDefault      bool       `json:"effectiveDefault"`
	PlatformManaged       bool       `json:"platformManaged"`
}

// IdentityLink is one entry of DirectoryView.IdentityLinks.
type IdentityLink struct {
	UserID           string `json:"userId"`
	Provider         string `json:"provider"`
	ProviderUsername string `json:"providerUsername"`
	ProviderUserID   string `json:"providerUserId"`
}

// DirectoryView is an org's approval directory in KiCI's shape: identity
// links, each user's CI trust level, and team memberships (kici has no
// teams: always empty). UpdatedAt is the newest member's.
type DirectoryView struct {
	CustomerID          string            `json:"customerId"`
	IdentityLinks       []IdentityLink    `json:"identityLinks"`
	MemberCITrustLevels map[string]string `json:"memberCiTrustLevels"`
	TeamMemberships     []any             `json:"teamMemberships"`
	UpdatedAt           time.Time         `json:"updatedAt"`
}

// ForkIgnore is the TrustPolicyView.ForkPolicy that drops fork pull
// requests without a run (KiCI ForkPolicy "ignore").
const ForkIgnore = "ignore"

// TrustPolicyEnvelope is the body of GET and PATCH /trust-policy.
type TrustPolicyEnvelope struct {
	Policy TrustPolicyView `json:"policy"`
}

// DirectoryEnvelope is the body of GET and PATCH /trust-policy/directory:
// the org's approval directory, null while it has no member, and whether
// the KiCI Platform manages it (writes are then refused).
type DirectoryEnvelope struct {
	Directory       *DirectoryView `json:"directory"`
	PlatformManaged bool           `json:"platformManaged"`
}

// DirectoryRemoval is the body of DELETE /trust-policy/directory: the
// directory after the removal and whether the user was a member.
type DirectoryRemoval struct {
	DirectoryEnvelope
	Removed bool `json:"removed"`
}
