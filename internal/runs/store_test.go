package runs

import (
	"context"
	"path/filepath"
	"testing"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

// newStore opens a fresh SQLite store in a temporary directory.
func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "kici.db"))
	if err != nil {
		t.Fatalf("open sqlite store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
