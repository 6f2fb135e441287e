package orchestrator

import (
	"context"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trustpolicy"
)

// trustPolicyFunc returns the effective trust policy of an org: the stored
// one, else kici's defaults.
func trustPolicyFunc(st store.Store) approval.PolicyFunc {
	return func(ctx context.Context, orgID string) (store.TrustPolicy, error) {
		p, _, err := trustpolicy.Effective(ctx, st, orgID)
		return p, err
	}
}
