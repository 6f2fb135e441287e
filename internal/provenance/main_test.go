package provenance

import (
	"context"
	"sync"
	"testing"

	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConcurrentFirstKeyOnPostgres: orchestrators sharing one PostgreSQL
// database race to create the first signing key; the one-active-key index
// lets exactly one win and every manager ends up signing with that key.
func TestConcurrentFirstKeyOnPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	mk, err := masterkey.New(make([]byte, masterkey.Size))
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	kids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		st, err := postgres.Open(ctx, url) // one connection pool per "orchestrator"
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			kid, _, err := NewKeys(st, mk).Active(ctx)
			if err != nil {
				t.Error(err)
			}
			kids[i] = kid
		}()
	}
	wg.Wait()
	st, _ := postgres.Open(ctx, url)
	defer st.Close()
	all, err := st.ListSigningKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("%d keys created, want 1", len(all))
	}
	for _, k := range kids {
		if k != all[0].Kid {
			t.Fatalf("managers use %v, stored key %s", kids, all[0].Kid)
		}
	}
}
