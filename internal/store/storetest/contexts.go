package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"kici.dev/kici/internal/store"
)

func testContexts(t *testing.T, s store.Store) {
	ctx := context.Background()
	wait, hold := int64(30), int64(600)
	trusted := "trusted"
	c := &store.Context{OrgID: "acme", Name: "release", Type: store.ContextTypeFixed, Enabled: true,
		BranchRestrictions: []string{"main", "release/*"}, RequiredReviewers: []string{"alice"},
		WaitTimerSeconds: &wait, HoldExpirySeconds: &hold, MinimumTrust: &trusted, CreatedBy: "tok-1"}
	created, err := s.UpsertContext(ctx, c, nil)
	if err != nil || !created || c.ID == "" {
		t.Fatalf("create: %v %v %q", created, err, c.ID)
	}
	got, err := s.GetContext(ctx, "acme", "release")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || !got.Enabled || !reflect.DeepEqual(got.BranchRestrictions, []string{"main", "release/*"}) ||
		!reflect.DeepEqual(got.RequiredReviewers, []string{"alice"}) || got.WaitTimerSeconds == nil || *got.WaitTimerSeconds != 30 ||
		got.HoldExpirySeconds == nil || *got.HoldExpirySeconds != 600 || got.MinimumTrust == nil || *got.MinimumTrust != "trusted" ||
		got.CreatedBy != "tok-1" || got.CreatedAt.IsZero() {
		t.Fatalf("stored context: %+v", got)
	}
	// Same name in another org is a different context.
	if _, err := s.GetContext(ctx, "other", "release"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}

	// Upsert of an existing name keeps the id and replaces the fields;
	// vars are seeded unlocked.
	again := &store.Context{OrgID: "acme", Name: "release", Type: store.ContextTypeGlob, GlobPattern: "rel*", Enabled: false, CreatedBy: "tok-2"}
	created, err = s.UpsertContext(ctx, again, map[string]string{"REGION": "eu"})
	if err != nil || created || again.ID != c.ID {
		t.Fatalf("upsert existing: %v %v %q want id %q", created, err, again.ID, c.ID)
	}
	got, _ = s.GetContext(ctx, "acme", "release")
	if got.Type != "glob" || got.GlobPattern != "rel*" || got.Enabled || got.RequiredReviewers != nil ||
		got.WaitTimerSeconds != nil || got.MinimumTrust != nil || len(got.BranchRestrictions) != 0 || got.BranchRestrictions == nil ||
		got.CreatedBy != "tok-1" {
		t.Fatalf("after upsert: %+v", got)
	}

	// Policy update changes policy fields only; nil clears.
	if err := s.UpdateContextPolicy(ctx, "acme", "release", func(c *store.Context) error {
		c.RequiredReviewers = []string{"bob", "carol"}
		c.Enabled = true
		c.Type = "fixed" // not a policy field: ignored
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A failing mutate changes nothing and its error comes back.
	boom := errors.New("boom")
	if err := s.UpdateContextPolicy(ctx, "acme", "release", func(c *store.Context) error {
		c.RequiredReviewers = nil
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("mutate error: %v", err)
	}
	got2, _ := s.GetContext(ctx, "acme", "release")
	if !got2.Enabled || !reflect.DeepEqual(got2.RequiredReviewers, []string{"bob", "carol"}) || got2.Type != "glob" {
		t.Fatalf("after policy: %+v", got2)
	}
	if err := s.UpdateContextPolicy(ctx, "acme", "nope", func(*store.Context) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("policy unknown: %v", err)
	}

	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "alpha", Type: "fixed", Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListContexts(ctx, "acme")
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "release" {
		t.Fatalf("list: %v %v", list, err)
	}

	// Bindings: identical binding is not duplicated.
	if ok, err := s.BindContext(ctx, "acme", "release", "release/*", "**"); err != nil || !ok {
		t.Fatalf("bind: %v %v", ok, err)
	}
	if ok, err := s.BindContext(ctx, "acme", "release", "release/*", "**"); err != nil || ok {
		t.Fatalf("bind again: %v %v", ok, err)
	}
	if ok, err := s.BindContext(ctx, "acme", "release", "release/*", "host-a"); err != nil || !ok {
		t.Fatalf("bind other host: %v %v", ok, err)
	}
	if _, err := s.BindContext(ctx, "acme", "nope", "x", "**"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bind unknown: %v", err)
	}
	bs, err := s.ListContextBindings(ctx, "acme", "release")
	if err != nil || len(bs) != 2 || bs[0].HostPattern != "**" || bs[1].HostPattern != "host-a" {
		t.Fatalf("bindings: %v %v", bs, err)
	}

	// Variables.
	if err := s.PutContextVariable(ctx, "acme", "release", &store.ContextVariable{Key: "A", Value: "1", Locked: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutContextVariable(ctx, "acme", "nope", &store.ContextVariable{Key: "A", Value: "1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("put on unknown context: %v", err)
	}
	vs, err := s.ListContextVariables(ctx, "acme", "release")
	if err != nil || len(vs) != 2 || vs[0].Key != "A" || !vs[0].Locked || vs[1].Key != "REGION" || vs[1].Value != "eu" || vs[1].Locked {
		t.Fatalf("variables: %+v %v", vs, err)
	}
	if err := s.PutContextVariable(ctx, "acme", "release", &store.ContextVariable{Key: "A", Value: "2"}); err != nil {
		t.Fatal(err)
	}
	vs, _ = s.ListContextVariables(ctx, "acme", "release")
	if vs[0].Value != "2" || vs[0].Locked {
		t.Fatalf("replaced variable: %+v", vs[0])
	}
	if err := s.DeleteContextVariable(ctx, "acme", "release", "A"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteContextVariable(ctx, "acme", "release", "A"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete missing variable: %v", err)
	}
	if _, err := s.ListContextVariables(ctx, "acme", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("variables of unknown context: %v", err)
	}

	// Delete cascades: re-creating the name starts empty.
	if err := s.DeleteContext(ctx, "acme", "release"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteContext(ctx, "acme", "release"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "release", Type: "fixed", Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	if vs, err := s.ListContextVariables(ctx, "acme", "release"); err != nil || len(vs) != 0 {
		t.Fatalf("variables survived delete: %v %v", vs, err)
	}
	if bs, err := s.ListContextBindings(ctx, "acme", "release"); err != nil || len(bs) != 0 {
		t.Fatalf("bindings survived delete: %v %v", bs, err)
	}
}
