// Package trustpolicy holds kici's default fork trust policy and reads an
// org's effective policy: the stored row, or the defaults when none is
// stored. The admin API and the ingress pipeline both use it, so the two
// never disagree about what an org without a row gets.
package trustpolicy

import (
	"context"
	"errors"

	"kici.dev/kici/internal/store"
)

// Defaults applied when an org has no stored policy.
const (
	// DefaultForkPolicy is store.ForkHold. KiCI's fail-closed default is
	// ignore, which drops fork pull requests without a trace on the pull
	// request; kici holds them for an approval instead, so a contributor
	// sees a pending run and an operator can let it through.
	DefaultForkPolicy = store.ForkHold
	// DefaultApprovalExpirySeconds is 72 hours, the approval window KiCI
	// documents.
	DefaultApprovalExpirySeconds int64 = 72 * 3600
	// MinApprovalExpirySeconds is the shortest approval window the admin
	// API accepts.
	MinApprovalExpirySeconds int64 = 60
)

// Default returns the policy in force for orgID when none is stored
// (Source "" and a zero UpdatedAt mark it as not stored).
func Default(orgID string) store.TrustPolicy {
	return store.TrustPolicy{OrgID: orgID, ForkPolicy: DefaultForkPolicy, ApprovalExpirySeconds: DefaultApprovalExpirySeconds}
}

// Reader is the part of the store Effective needs.
type Reader interface {
	GetTrustPolicy(ctx context.Context, orgID string) (*store.TrustPolicy, error)
}

// Effective returns orgID's policy and whether it is stored. With no stored
// row it returns Default(orgID), false, nil. On a read error it returns
// Default(orgID) with the error, so a caller that must decide anyway holds
// fork pull requests (KiCI applies hold when the policy cannot be read).
// A stored row with a non-positive expiry gets the default expiry.
func Effective(ctx context.Context, st Reader, orgID string) (store.TrustPolicy, bool, error) {
	p, err := st.GetTrustPolicy(ctx, orgID)
	if errors.Is(err, store.ErrNotFound) {
		return Default(orgID), false, nil
	}
	if err != nil {
		return Default(orgID), false, err
	}
	out := *p
	if out.ApprovalExpirySeconds <= 0 {
		out.ApprovalExpirySeconds = DefaultApprovalExpirySeconds
	}
	if out.ForkPolicy == "" {
		out.ForkPolicy = DefaultForkPolicy
	}
	return out, true, nil
}

// ExpiryHours is seconds expressed in whole hours, rounded up and at least
// 1 (KiCI approvalExpiryHours).
func ExpiryHours(seconds int64) int64 {
	h := (seconds + 3599) / 3600
	if h < 1 {
		h = 1
	}
	return h
}
