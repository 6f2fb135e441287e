package storetest

import (
	"errors"
	"sync"
	"testing"

	"kici.dev/kici/internal/store"
)

func trustAudit(action string) *store.AccessLogEntry {
	return &store.AccessLogEntry{TokenID: "tok-1", Role: "owner", Action: action, Resource: "acme"}
}

func countAudit(t *testing.T, s store.Store, action string) int {
	t.Helper()
	rows, err := s.ListAccessLog(ctxT(t), store.AccessLogFilter{Action: action, Limit: 1000})
	must(t, err)
	return len(rows)
}

var defaultTrust = store.TrustPolicy{ForkPolicy: store.ForkHold, ApprovalExpirySeconds: 259200, Source: "local"}

func testTrustPolicy(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	_, err := s.GetTrustPolicy(ctx, "acme")
	wantErr(t, "policy before any write", err, store.ErrNotFound)

	// The first update merges onto the defaults.
	var seen store.TrustPolicy
	p, err := s.UpdateTrustPolicyAudited(ctx, "acme", defaultTrust, func(p *store.TrustPolicy) error {
		seen = *p
		p.ForkPolicy = store.ForkAllow
		return nil
	}, trustAudit("trust_policy.updated"))
	must(t, err)
	if seen.OrgID != "acme" || seen.ForkPolicy != store.ForkHold || seen.ApprovalExpirySeconds != 259200 {
		t.Errorf("mutate saw %+v, want the defaults for acme", seen)
	}
	if p.OrgID != "acme" || p.ForkPolicy != store.ForkAllow || p.ApprovalExpirySeconds != 259200 || p.Source != "local" || p.UpdatedAt.IsZero() {
		t.Fatalf("stored policy: %+v", p)
	}
	got, err := s.GetTrustPolicy(ctx, "acme")
	must(t, err)
	same(t, "GetTrustPolicy", p, got)
	if n := countAudit(t, s, "trust_policy.updated"); n != 1 {
		t.Fatalf("audit rows: %d", n)
	}

	// A later update merges onto the stored policy, not the defaults.
	p, err = s.UpdateTrustPolicyAudited(ctx, "acme", defaultTrust, func(p *store.TrustPolicy) error {
		if p.ForkPolicy != store.ForkAllow {
			t.Errorf("mutate saw fork policy %q, want the stored allow", p.ForkPolicy)
		}
		p.ApprovalExpirySeconds = 3600
		p.OrgID = "someone-else" // the org is not the mutator's to change
		return nil
	}, trustAudit("trust_policy.updated"))
	must(t, err)
	if p.OrgID != "acme" || p.ForkPolicy != store.ForkAllow || p.ApprovalExpirySeconds != 3600 {
		t.Fatalf("merged policy: %+v", p)
	}
	if _, err := s.GetTrustPolicy(ctx, "someone-else"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("mutated org id was stored: %v", err)
	}

	// A failing mutate changes nothing, writes no audit row, and its error
	// comes back as is.
	boom := errors.New("boom")
	_, err = s.UpdateTrustPolicyAudited(ctx, "acme", defaultTrust, func(p *store.TrustPolicy) error {
		p.ForkPolicy = store.ForkIgnore
		return boom
	}, trustAudit("trust_policy.updated"))
	if err != boom {
		t.Fatalf("mutate error: %v", err)
	}
	got, err = s.GetTrustPolicy(ctx, "acme")
	must(t, err)
	same(t, "policy after failed mutate", p, got)
	if n := countAudit(t, s, "trust_policy.updated"); n != 2 {
		t.Fatalf("audit rows after failed mutate: %d, want 2", n)
	}
	// Nor does a failing first write create a row.
	_, err = s.UpdateTrustPolicyAudited(ctx, "other", defaultTrust, func(*store.TrustPolicy) error { return boom }, trustAudit("trust_policy.updated"))
	if err != boom {
		t.Fatalf("mutate error on first write: %v", err)
	}
	_, err = s.GetTrustPolicy(ctx, "other")
	wantErr(t, "policy after failed first write", err, store.ErrNotFound)
}

// testTrustPolicyConcurrent runs 20 concurrent read-merge-writes of one org:
// none may be lost, and each leaves its audit row.
func testTrustPolicyConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, errs[i] = s.UpdateTrustPolicyAudited(ctx, "acme", defaultTrust, func(p *store.TrustPolicy) error {
				p.ApprovalExpirySeconds++
				return nil
			}, trustAudit("trust_policy.updated"))
		}(i)
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	p, err := s.GetTrustPolicy(ctx, "acme")
	must(t, err)
	if p.ApprovalExpirySeconds != defaultTrust.ApprovalExpirySeconds+n {
		t.Fatalf("expiry %d after %d increments of %d: lost updates", p.ApprovalExpirySeconds, n, defaultTrust.ApprovalExpirySeconds)
	}
	if got := countAudit(t, s, "trust_policy.updated"); got != n {
		t.Fatalf("audit rows: %d, want %d", got, n)
	}
}

func testTrustDirectory(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const action = "trust_directory.updated"
	put := func(m *store.DirectoryMember) *store.DirectoryMember {
		t.Helper()
		must(t, s.PutDirectoryMemberAudited(ctx, m, trustAudit(action)))
		if m.UpdatedAt.IsZero() {
			t.Fatalf("member %s: UpdatedAt not set", m.UserID)
		}
		return m
	}
	list := func(org string) []*store.DirectoryMember {
		t.Helper()
		l, err := s.ListDirectoryMembers(ctx, org)
		must(t, err)
		return l
	}
	bob := put(&store.DirectoryMember{OrgID: "acme", UserID: "bob", Provider: "github", ProviderUserID: "2", ProviderUsername: "bobby", CITrust: store.CITrustRead})
	alice := put(&store.DirectoryMember{OrgID: "acme", UserID: "alice", Provider: "github", ProviderUserID: "1", ProviderUsername: "alice", CITrust: store.CITrustWrite})
	aliceGL := put(&store.DirectoryMember{OrgID: "other", UserID: "alice", Provider: "github", ProviderUserID: "1", ProviderUsername: "alice", CITrust: store.CITrustAdmin})
	same(t, "directory ordered by user id", []*store.DirectoryMember{alice, bob}, list("acme"))
	same(t, "other org's directory", []*store.DirectoryMember{aliceGL}, list("other"))

	got, err := s.FindDirectoryMember(ctx, "acme", "github", "2")
	must(t, err)
	same(t, "find by provider user id", bob, got)
	_, err = s.FindDirectoryMember(ctx, "acme", "gitlab", "2")
	wantErr(t, "find other provider", err, store.ErrNotFound)
	_, err = s.FindDirectoryMember(ctx, "acme", "github", "bobby")
	wantErr(t, "find by username", err, store.ErrNotFound)

	// Re-registering a user replaces their link (a new provider id).
	alice2 := put(&store.DirectoryMember{OrgID: "acme", UserID: "alice", Provider: "github", ProviderUserID: "11", ProviderUsername: "alice", CITrust: store.CITrustAdmin})
	same(t, "user re-registered", []*store.DirectoryMember{alice2, bob}, list("acme"))
	_, err = s.FindDirectoryMember(ctx, "acme", "github", "1")
	wantErr(t, "old link gone", err, store.ErrNotFound)
	// Registering a provider id to another user moves it.
	carol := put(&store.DirectoryMember{OrgID: "acme", UserID: "carol", Provider: "github", ProviderUserID: "2", ProviderUsername: "bobby", CITrust: store.CITrustNone})
	same(t, "provider id moved", []*store.DirectoryMember{alice2, carol}, list("acme"))
	same(t, "other org untouched", []*store.DirectoryMember{aliceGL}, list("other"))

	// Delete removes every link of the user, once.
	removed, err := s.DeleteDirectoryMemberAudited(ctx, "acme", "alice", trustAudit(action))
	wantChanged(t, "delete alice", removed, err, true)
	removed, err = s.DeleteDirectoryMemberAudited(ctx, "acme", "alice", trustAudit(action))
	wantChanged(t, "delete alice again", removed, err, false)
	same(t, "after delete", []*store.DirectoryMember{carol}, list("acme"))
	same(t, "other org after delete", []*store.DirectoryMember{aliceGL}, list("other"))
	// Five puts and one effective delete were audited; the no-op delete was not.
	if n := countAudit(t, s, action); n != 6 {
		t.Fatalf("audit rows: %d, want 6", n)
	}
	if l := list("nobody"); len(l) != 0 {
		t.Fatalf("empty directory: %v", l)
	}
}
