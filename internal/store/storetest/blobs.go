package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"kici.dev/kici/internal/store"
)

func testCacheEntries(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(id, scope, key string, sec int) *store.CacheEntry {
		return &store.CacheEntry{ID: id, OrgID: "o1", Scope: scope, Key: key, BlobKey: "caches/" + id, SizeBytes: int64(sec) * 100, SHA256: "ab", JobID: "j" + id, CreatedAt: at(sec)}
	}
	for _, e := range []*store.CacheEntry{
		mk("c1", "acme/app@main", "go-linux-aaa", 1),
		mk("c2", "acme/app@main", "go-linux-bbb", 2),
		mk("c3", "acme/app@dev", "go-linux-ccc", 3),
		mk("c4", "acme/app@main", "node-linux-x", 4),
		{ID: "c5", OrgID: "o2", Scope: "acme/app@main", Key: "go-linux-zzz", BlobKey: "b", SizeBytes: 1, SHA256: "cd", JobID: "j", CreatedAt: at(5)},
	} {
		must(t, s.InsertCacheEntry(ctx, e))
	}
	if err := s.InsertCacheEntry(ctx, mk("c9", "acme/app@main", "go-linux-aaa", 9)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("same key twice in a scope: %v, want ErrConflict", err)
	}
	got, err := s.FindCacheEntry(ctx, "o1", "acme/app@main", "go-linux-aaa", false)
	must(t, err)
	if got.ID != "c1" || got.BlobKey != "caches/c1" || got.SizeBytes != 100 || got.JobID != "jc1" || !got.CreatedAt.Equal(at(1)) || !got.LastUsedAt.Equal(at(1)) {
		t.Errorf("exact: %+v", got)
	}
	// Prefix: the newest matching key of the scope and org only.
	if got, err = s.FindCacheEntry(ctx, "o1", "acme/app@main", "go-linux-", true); err != nil || got.ID != "c2" {
		t.Errorf("prefix: %+v %v, want c2", got, err)
	}
	// A prefix is literal: LIKE wildcards match nothing.
	for _, p := range []string{"go-linux-%", "go_linux-", "go-linux-aaa-more"} {
		if _, err := s.FindCacheEntry(ctx, "o1", "acme/app@main", p, true); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("prefix %q: %v, want ErrNotFound", p, err)
		}
	}
	if _, err := s.FindCacheEntry(ctx, "o1", "acme/app@dev", "go-linux-aaa", false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other scope: %v, want ErrNotFound", err)
	}
	must(t, s.TouchCacheEntry(ctx, "c1", at(10)))
	list, err := s.ListCacheEntries(ctx, "o1")
	must(t, err)
	var ids []string
	for _, e := range list {
		ids = append(ids, e.ID)
	}
	if fmt.Sprint(ids) != "[c2 c3 c4 c1]" {
		t.Errorf("least recently used first: %v", ids)
	}
	must(t, s.DeleteCacheEntry(ctx, "c2"))
	must(t, s.DeleteCacheEntry(ctx, "c2"))
	if all, _ := s.ListCacheEntries(ctx, ""); len(all) != 4 {
		t.Errorf("all orgs after a delete: %d entries, want 4", len(all))
	}
}

func testArtifacts(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(run, name string, size int64, sec int) *store.Artifact {
		return &store.Artifact{ID: run + "-" + name, OrgID: "o1", RunID: run, JobID: "j-" + run, JobName: "build", Name: name,
			BlobKey: "artifacts/" + run + "/" + name, SizeBytes: size, SHA256: "ef", CreatedAt: at(sec), ExpiresAt: at(sec + 100)}
	}
	must(t, s.InsertArtifact(ctx, mk("r1", "bin", 400, 1), 2, 1000))
	if err := s.InsertArtifact(ctx, mk("r1", "bin", 1, 2), 2, 1000); !errors.Is(err, store.ErrConflict) {
		t.Errorf("same name twice in a run: %v, want ErrConflict", err)
	}
	// Quota: 400 + 700 > 1000.
	if err := s.InsertArtifact(ctx, mk("r2", "big", 700, 2), 2, 1000); !errors.Is(err, store.ErrLimit) {
		t.Errorf("over the org quota: %v, want ErrLimit", err)
	}
	must(t, s.InsertArtifact(ctx, mk("r1", "docs", 100, 3), 2, 1000))
	// Per run: r1 has 2 of 2.
	if err := s.InsertArtifact(ctx, mk("r1", "third", 1, 4), 2, 1000); !errors.Is(err, store.ErrLimit) {
		t.Errorf("over the per-run count: %v, want ErrLimit", err)
	}
	must(t, s.InsertArtifact(ctx, mk("r1", "third", 1, 4), 0, 0)) // no limits
	got, err := s.GetArtifact(ctx, "r1", "bin")
	must(t, err)
	if got.JobName != "build" || got.SizeBytes != 400 || got.BlobKey != "artifacts/r1/bin" || !got.ExpiresAt.Equal(at(101)) {
		t.Errorf("round trip: %+v", got)
	}
	if _, err := s.GetArtifact(ctx, "r1", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
	list, err := s.ListArtifacts(ctx, "r1")
	must(t, err)
	if len(list) != 3 || list[0].Name != "bin" || list[2].Name != "third" {
		t.Errorf("list: %+v", list)
	}
	n, b, err := s.ArtifactUsage(ctx, "o1")
	if err != nil || n != 3 || b != 501 {
		t.Errorf("usage = %d, %d, %v; want 3, 501", n, b, err)
	}
	exp, err := s.ListExpiredArtifacts(ctx, at(104), 10)
	must(t, err)
	if len(exp) != 2 || exp[0].Name != "bin" || exp[1].Name != "docs" {
		t.Errorf("expired before 104: %+v", exp)
	}
	must(t, s.DeleteArtifact(ctx, "r1-bin"))
	if list, _ := s.ListArtifacts(ctx, "r1"); len(list) != 2 {
		t.Errorf("after delete: %d", len(list))
	}

	// Concurrent inserts never pass the quota together.
	var wg sync.WaitGroup
	var ok int
	var mu sync.Mutex
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.InsertArtifact(ctx, mk(fmt.Sprintf("q%d", i), "x", 300, 5), 0, 1000); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if !errors.Is(err, store.ErrLimit) {
				t.Errorf("concurrent insert: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 2 { // 101 used + 2×300 ≤ 1000 < 101 + 3×300
		t.Errorf("%d concurrent inserts passed the quota, want 2", ok)
	}
}

func testJobCredentials(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.SetJobCredential(ctx, "j1", "h1"))
	must(t, s.SetJobCredential(ctx, "j2", "h2"))
	if id, err := s.JobForCredential(ctx, "h1"); err != nil || id != "j1" {
		t.Errorf("h1 = %q, %v", id, err)
	}
	must(t, s.SetJobCredential(ctx, "j1", "h3")) // a redispatch replaces it
	if _, err := s.JobForCredential(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("replaced credential still valid: %v", err)
	}
	if id, err := s.JobForCredential(ctx, "h3"); err != nil || id != "j1" {
		t.Errorf("h3 = %q, %v", id, err)
	}
}
