package trustpolicy

import (
	"context"
	"errors"
	"testing"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

type failingReader struct{}

func (failingReader) GetTrustPolicy(context.Context, string) (*store.TrustPolicy, error) {
	return nil, errors.New("database down")
}

func TestEffective(t *testing.T) {
	ctx := context.Background()
	teststore.Each(t, func(t *testing.T, st store.Store) {
		p, stored, err := Effective(ctx, st, "acme")
		if err != nil || stored || p.ForkPolicy != store.ForkHold || p.ApprovalExpirySeconds != 259200 || p.OrgID != "acme" {
			t.Fatalf("defaults: %+v %v %v", p, stored, err)
		}
		if _, err := st.UpdateTrustPolicyAudited(ctx, "acme", Default("acme"), func(p *store.TrustPolicy) error {
			p.ForkPolicy = store.ForkAllow
			return nil
		}, &store.AccessLogEntry{Action: "trust_policy.updated", Resource: "trust_policy:acme"}); err != nil {
			t.Fatal(err)
		}
		p, stored, err = Effective(ctx, st, "acme")
		if err != nil || !stored || p.ForkPolicy != store.ForkAllow || p.ApprovalExpirySeconds != 259200 {
			t.Fatalf("stored: %+v %v %v", p, stored, err)
		}
		// A read error still yields the defaults, so a caller that must decide
		// holds fork pull requests.
		p, stored, err = Effective(ctx, failingReader{}, "acme")
		if err == nil || stored || p.ForkPolicy != store.ForkHold {
			t.Fatalf("read error: %+v %v %v", p, stored, err)
		}
	})
}

func TestExpiryHours(t *testing.T) {
	for secs, want := range map[int64]int64{60: 1, 3600: 1, 3601: 2, 259200: 72, 0: 1} {
		if got := ExpiryHours(secs); got != want {
			t.Errorf("ExpiryHours(%d) = %d, want %d", secs, got, want)
		}
	}
}
