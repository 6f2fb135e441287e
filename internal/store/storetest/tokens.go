package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// ---------------------------------------------------------------- tokens

func testAgentTokens(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	static := &store.AgentToken{ID: "t1", TokenHash: "hash1", Prefix: "kat_0123abcd", Kind: store.AgentTokenStatic,
		Labels: []string{"linux", "gpu"}, CreatedAt: at(0)}
	eph := &store.AgentToken{ID: "t2", TokenHash: "hash2", Prefix: "kat_ffff0000", Kind: store.AgentTokenEphemeral,
		BoundAgentID: "host-1234abcd", ExpiresAt: ptime(at(3600)), CreatedAt: at(1)}
	empty := &store.AgentToken{ID: "t3", TokenHash: "hash3", Prefix: "kat_x", Kind: store.AgentTokenStatic,
		Labels: []string{}, CreatedAt: at(1)}
	for _, tok := range []*store.AgentToken{static, eph, empty} {
		must(t, s.CreateAgentToken(ctx, tok))
	}
	for _, tok := range []*store.AgentToken{static, eph, empty} {
		got, err := s.GetAgentTokenByHash(ctx, tok.TokenHash)
		must(t, err)
		same(t, "GetAgentTokenByHash "+tok.ID, tok, got)
	}
	_, err := s.GetAgentTokenByHash(ctx, "nope")
	wantErr(t, "GetAgentTokenByHash unknown", err, store.ErrNotFound)
	wantErr(t, "CreateAgentToken duplicate hash",
		s.CreateAgentToken(ctx, &store.AgentToken{ID: "t4", TokenHash: "hash1", Kind: store.AgentTokenStatic, CreatedAt: at(2)}), store.ErrConflict)
	wantErr(t, "CreateAgentToken duplicate id",
		s.CreateAgentToken(ctx, &store.AgentToken{ID: "t1", TokenHash: "hash9", Kind: store.AgentTokenStatic, CreatedAt: at(2)}), store.ErrConflict)

	list, err := s.ListAgentTokens(ctx)
	must(t, err)
	same(t, "ListAgentTokens newest first", []string{"t3", "t2", "t1"}, ids(list, func(x *store.AgentToken) string { return x.ID }))

	must(t, s.RevokeAgentToken(ctx, "t1", at(10)))
	must(t, s.RevokeAgentToken(ctx, "t1", at(20)))
	got, err := s.GetAgentTokenByHash(ctx, "hash1")
	must(t, err)
	want := *static
	want.RevokedAt = ptime(at(10))
	same(t, "revoked token (first revocation kept)", &want, got)
	wantErr(t, "RevokeAgentToken unknown", s.RevokeAgentToken(ctx, "missing", at(1)), store.ErrNotFound)
}

func testAdminTokens(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	owner := &store.AdminToken{ID: "a1", Label: "bootstrap", Role: "owner", TokenHash: "h1", CreatedAt: at(0)}
	aud := &store.AdminToken{ID: "a2", Label: "ci bot", Role: "auditor", TokenHash: "h2", ExpiresAt: ptime(at(86400)), CreatedAt: at(5)}
	must(t, s.CreateAdminToken(ctx, owner))
	must(t, s.CreateAdminToken(ctx, aud))
	got, err := s.GetAdminTokenByHash(ctx, "h1")
	must(t, err)
	same(t, "GetAdminTokenByHash", owner, got)
	got, err = s.GetAdminTokenByHash(ctx, "h2")
	must(t, err)
	same(t, "GetAdminTokenByHash expiring", aud, got)
	_, err = s.GetAdminTokenByHash(ctx, "nope")
	wantErr(t, "GetAdminTokenByHash unknown", err, store.ErrNotFound)
	wantErr(t, "CreateAdminToken duplicate hash",
		s.CreateAdminToken(ctx, &store.AdminToken{ID: "a3", Role: "admin", TokenHash: "h1", CreatedAt: at(1)}), store.ErrConflict)

	d := &store.AdminToken{ID: "a4", Label: "defaulted", Role: "admin", TokenHash: "h4"}
	must(t, s.CreateAdminToken(ctx, d))
	if d.CreatedAt.IsZero() {
		t.Error("CreateAdminToken: zero CreatedAt not defaulted")
	}
	list, err := s.ListAdminTokens(ctx)
	must(t, err)
	same(t, "ListAdminTokens newest first", []string{"a4", "a2", "a1"}, ids(list, func(x *store.AdminToken) string { return x.ID }))

	must(t, s.RevokeAdminToken(ctx, "a2"))
	must(t, s.RevokeAdminToken(ctx, "a2"))
	got, err = s.GetAdminTokenByHash(ctx, "h2")
	must(t, err)
	want := *aud
	want.Revoked = true
	same(t, "revoked admin token", &want, got)
	wantErr(t, "RevokeAdminToken unknown", s.RevokeAdminToken(ctx, "missing"), store.ErrNotFound)
}

// ---------------------------------------------------------------- ListRuns

func testListRuns(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// 25 runs: i%3 workflow, i%2 repo, status cycle, two sharing created_at.
	statuses := []status.Run{status.RunPending, status.RunRunning, status.RunSuccess, status.RunFailed, status.RunCancelled}
	var all []*store.Run
	for i := 0; i < 25; i++ {
		r := fullRun(fmt.Sprintf("run-%02d", i), at(i))
		if i == 24 {
			r.CreatedAt = at(23) // tie with run-23: id decides (desc)
		}
		r.WorkflowName = []string{"ci", "release", "nightly"}[i%3]
		r.RepoIdentifier = []string{"org/a", "org/b"}[i%2]
		r.DeliveryID = fmt.Sprintf("d%d", i/5)
		r.Status = statuses[i%5]
		r.SourceID = []string{"src-a", "src-b", ""}[i%3]
		r.TriggerType = []apitypes.TriggerKind{apitypes.TriggerPush, apitypes.TriggerPullRequest}[i%2]
		// Branch facts: a pushed branch (ref), a pull request's base
		// (target branch), a tag (neither).
		switch i % 4 {
		case 0:
			r.Ref, r.TargetBranch = "refs/heads/main", "main"
		case 1:
			r.Ref, r.TargetBranch = "refs/pull/7/head", "main"
		case 2:
			r.Ref, r.TargetBranch = "refs/heads/feature/x", ""
		case 3:
			r.Ref, r.TargetBranch = "refs/tags/v1", ""
		}
		must(t, s.CreateRun(ctx, r, nil))
		all = append(all, r)
	}
	newest := func(pred func(*store.Run) bool) []string {
		var out []string
		for i := len(all) - 1; i >= 0; i-- {
			if pred(all[i]) {
				out = append(out, all[i].ID)
			}
		}
		if out == nil {
			out = []string{}
		}
		return out
	}
	check := func(name string, f store.RunFilter, pred func(*store.Run) bool) {
		t.Helper()
		want := newest(pred)
		got, total, err := s.ListRuns(ctx, f)
		must(t, err)
		if total != len(want) {
			t.Errorf("%s: total %d, want %d", name, total, len(want))
		}
		lim := f.Limit
		if lim <= 0 {
			lim = 20
		}
		lo, hi := f.Offset, f.Offset+lim
		if lo > len(want) {
			lo = len(want)
		}
		if hi > len(want) {
			hi = len(want)
		}
		same(t, name, want[lo:hi], ids(got, func(x *store.Run) string { return x.ID }))
	}
	check("no filter (default limit 20)", store.RunFilter{}, func(*store.Run) bool { return true })
	check("page 2", store.RunFilter{Limit: 10, Offset: 10}, func(*store.Run) bool { return true })
	check("last page", store.RunFilter{Limit: 10, Offset: 20}, func(*store.Run) bool { return true })
	check("past the end", store.RunFilter{Limit: 10, Offset: 40}, func(*store.Run) bool { return true })
	check("statuses OR", store.RunFilter{Statuses: []status.Run{status.RunFailed, status.RunCancelled}, Limit: 100},
		func(r *store.Run) bool { return r.Status == status.RunFailed || r.Status == status.RunCancelled })
	check("workflow", store.RunFilter{WorkflowName: "release", Limit: 100}, func(r *store.Run) bool { return r.WorkflowName == "release" })
	check("repo", store.RunFilter{Repo: "org/b", Limit: 3}, func(r *store.Run) bool { return r.RepoIdentifier == "org/b" })
	check("delivery", store.RunFilter{DeliveryID: "d2"}, func(r *store.Run) bool { return r.DeliveryID == "d2" })
	check("source", store.RunFilter{SourceID: "src-b", Limit: 100}, func(r *store.Run) bool { return r.SourceID == "src-b" })
	check("trigger type", store.RunFilter{TriggerType: apitypes.TriggerPullRequest, Limit: 100}, func(r *store.Run) bool { return r.TriggerType == apitypes.TriggerPullRequest })
	check("branch main (pushed or targeted)", store.RunFilter{Branch: "main", Limit: 100}, func(r *store.Run) bool { return r.TargetBranch == "main" })
	check("branch with a slash", store.RunFilter{Branch: "feature/x", Limit: 100}, func(r *store.Run) bool { return r.Ref == "refs/heads/feature/x" })
	check("branch is not a tag", store.RunFilter{Branch: "v1", Limit: 100}, func(*store.Run) bool { return false })
	check("source and trigger", store.RunFilter{SourceID: "src-a", TriggerType: apitypes.TriggerPush, Limit: 100},
		func(r *store.Run) bool { return r.SourceID == "src-a" && r.TriggerType == apitypes.TriggerPush })
	since := at(20)
	check("since (strictly later)", store.RunFilter{Since: &since}, func(r *store.Run) bool { return r.CreatedAt.After(since) })
	check("combined", store.RunFilter{Statuses: []status.Run{status.RunPending, status.RunSuccess}, Repo: "org/a", WorkflowName: "ci", Limit: 100},
		func(r *store.Run) bool {
			return (r.Status == status.RunPending || r.Status == status.RunSuccess) && r.RepoIdentifier == "org/a" && r.WorkflowName == "ci"
		})
	check("no match", store.RunFilter{WorkflowName: "none"}, func(*store.Run) bool { return false })

	got, _, err := s.ListRuns(ctx, store.RunFilter{Limit: 1})
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("limit 1: %d rows", len(got))
	}
	same(t, "ListRuns full row", all[24], got[0])
}

// ---------------------------------------------------------------- times

func testTimes(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	precise := time.Date(2024, 2, 29, 23, 59, 59, 987_654_321, zone)
	run := fullRun("r", precise)
	run.StartedAt = ptime(precise.Add(time.Microsecond))
	must(t, s.CreateRun(ctx, run, nil))
	got, err := s.GetRun(ctx, "r")
	must(t, err)
	wantT := precise.Truncate(time.Millisecond)
	if !got.CreatedAt.Equal(wantT) || !got.StartedAt.Equal(wantT) {
		t.Errorf("times: got %s / %s, want %s", got.CreatedAt.Format(time.RFC3339Nano),
			got.StartedAt.Format(time.RFC3339Nano), wantT.Format(time.RFC3339Nano))
	}
	if got.CreatedAt.Location() != time.UTC || got.StartedAt.Location() != time.UTC {
		t.Errorf("times not UTC: %v / %v", got.CreatedAt.Location(), got.StartedAt.Location())
	}
	must(t, s.CreateAgentToken(ctx, &store.AgentToken{ID: "t", TokenHash: "h", Kind: store.AgentTokenEphemeral,
		ExpiresAt: ptime(precise), CreatedAt: precise}))
	tok, err := s.GetAgentTokenByHash(ctx, "h")
	must(t, err)
	if !tok.ExpiresAt.Equal(wantT) || tok.ExpiresAt.Location() != time.UTC {
		t.Errorf("token expiresAt %v", tok.ExpiresAt)
	}
	// Times before the epoch and far in the future survive too.
	for i, ts := range []time.Time{time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC), time.Date(2999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)} {
		id := fmt.Sprintf("e%d", i)
		must(t, s.Enqueue(ctx, &store.QueueEntry{ID: id, CreatedAt: ts, AckDeadline: ptime(ts)}))
		list, err := s.ListQueue(ctx, nil)
		must(t, err)
		for _, e := range list {
			if e.ID == id && (!e.CreatedAt.Equal(ts) || !e.AckDeadline.Equal(ts)) {
				t.Errorf("queue time %s came back %s", ts, e.CreatedAt)
			}
		}
	}
}

// testAgentSessions: a session is stored, replaced by the next one of the
// same id, read back with its token and resume hash, and deleted only by
// the token it was opened with.
func testAgentSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.GetAgentSession(ctx, "a1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	for _, a := range []*store.AgentSession{
		{AgentID: "a1", TokenID: "tok-1", ResumeHash: []byte{1, 2, 3}},
		{AgentID: "a1", TokenID: "tok-2", ResumeHash: []byte{4, 5, 6}},
	} {
		if err := s.PutAgentSession(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetAgentSession(ctx, "a1")
	if err != nil || got.TokenID != "tok-2" || !bytes.Equal(got.ResumeHash, []byte{4, 5, 6}) {
		t.Fatalf("session = %+v (%v), want the second", got, err)
	}
	if err := s.DeleteAgentSession(ctx, "a1", "tok-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAgentSession(ctx, "a1"); err != nil {
		t.Fatalf("deleted by another token's id: %v", err)
	}
	if err := s.DeleteAgentSession(ctx, "a1", "tok-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAgentSession(ctx, "a1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}
