package storetest

import (
	"errors"
	"testing"

	"kici.dev/kici/internal/store"
)

// testWebSessions covers WebSessionStore: a session is found by its
// cookie hash with every field intact, touched, listed per subject newest
// first, ended one at a time or all of a subject's at once, and swept
// when idle or too old; a cookie hash is unique.
func testWebSessions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	alice1 := &store.WebSession{ID: "s-1", CookieHash: "h1", CSRF: "c1", Kind: store.WebSessionPerson, Subject: "gitea:alice", Name: "Alice",
		Role: "admin", RoutingKey: "rk-a", Client: "10.0.0.1", CreatedAt: at(0), LastSeenAt: at(0)}
	alice2 := &store.WebSession{ID: "s-2", CookieHash: "h2", CSRF: "c2", Kind: store.WebSessionPerson, Subject: "gitea:alice", Name: "Alice",
		Role: "admin", CreatedAt: at(5), LastSeenAt: at(5)}
	tok := &store.WebSession{ID: "s-3", CookieHash: "h3", CSRF: "c3", Kind: store.WebSessionToken, TokenHash: "th", Subject: "service:t1",
		Name: "ci", CreatedAt: at(10), LastSeenAt: at(10)}
	for _, w := range []*store.WebSession{alice1, alice2, tok} {
		must(t, s.CreateWebSession(ctx, w))
	}
	dup := *tok
	dup.ID = "s-4"
	if err := s.CreateWebSession(ctx, &dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second session with the same cookie hash: %v, want ErrConflict", err)
	}
	got, err := s.GetWebSessionByCookie(ctx, "h1")
	must(t, err)
	if *got != *alice1 {
		t.Fatalf("session = %+v, want %+v", got, alice1)
	}
	if _, err := s.GetWebSessionByCookie(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown cookie: %v, want ErrNotFound", err)
	}
	must(t, s.TouchWebSession(ctx, "s-1", at(20)))
	if got, _ := s.GetWebSessionByCookie(ctx, "h1"); !got.LastSeenAt.Equal(at(20)) || !got.CreatedAt.Equal(at(0)) {
		t.Fatalf("after touch: %+v", got)
	}
	if err := s.TouchWebSession(ctx, "s-zz", at(20)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("touch of an unknown session: %v", err)
	}
	list, err := s.ListWebSessions(ctx, "gitea:alice")
	must(t, err)
	if len(list) != 2 || list[0].ID != "s-2" || list[1].ID != "s-1" {
		t.Fatalf("alice's sessions = %+v", list)
	}
	all, _ := s.ListWebSessions(ctx, "")
	if len(all) != 3 || all[0].ID != "s-3" || all[0].Kind != store.WebSessionToken || all[0].TokenHash != "th" {
		t.Fatalf("all sessions = %+v", all)
	}
	// Idle sweep: s-2 (last seen at 5) goes; s-1 (touched at 20) and s-3
	// (seen at 10) stay. Age sweep: created before 3 → s-1 goes.
	n, err := s.DeleteExpiredWebSessions(ctx, at(8), at(-100))
	must(t, err)
	if n != 1 {
		t.Fatalf("idle sweep removed %d, want 1", n)
	}
	n, _ = s.DeleteExpiredWebSessions(ctx, at(-100), at(3))
	if n != 1 {
		t.Fatalf("age sweep removed %d, want 1", n)
	}
	must(t, s.CreateWebSession(ctx, alice2))
	n, err = s.DeleteWebSessionsOf(ctx, "gitea:alice")
	must(t, err)
	if n != 1 {
		t.Fatalf("revoke of alice's sessions removed %d, want 1", n)
	}
	must(t, s.DeleteWebSession(ctx, "s-3"))
	if err := s.DeleteWebSession(ctx, "s-3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if all, _ := s.ListWebSessions(ctx, ""); len(all) != 0 {
		t.Fatalf("sessions left: %+v", all)
	}
}
