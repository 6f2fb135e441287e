package auth

import (
	"context"
	"errors"

	"kici.dev/kici/internal/store"
)

// RunInScope reports whether run id belongs to a source with routing key
// rk (the scope of a routing-key-scoped token). An unknown run, a run
// without a source and a run of a deleted source are out of scope: a
// scoped caller learns nothing about other keys' ids. Both the admin API
// and the web UI decide run access with it.
func RunInScope(ctx context.Context, st store.Store, id, rk string) (bool, error) {
	run, err := st.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if run.SourceID == "" {
		return false, nil
	}
	src, err := st.GetSource(ctx, run.SourceID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return src.RoutingKey == rk, nil
}
