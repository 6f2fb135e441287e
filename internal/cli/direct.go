package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/store/sqlstore"
)

// Direct (database) mode of the dual-mode commands (KiCI `kici-admin
// context` with --database-url / KICI_DATABASE_URL): instead of calling a
// running orchestrator, the command opens the database itself and serves
// the very same admin routes in-process, so validation, status codes and
// access-log rows are identical. Database access is full access: the
// in-process caller is an owner identified as "bootstrap" in the access
// log, authenticated with a random token that lives only in memory.

// addDatabaseURLFlag adds --database-url to a dual-mode command group and
// switches the group to direct mode when it (or KICI_DATABASE_URL) is set.
func (a *app) addDatabaseURLFlag(cmd *cobra.Command) {
	var dbURL string
	cmd.PersistentFlags().StringVar(&dbURL, "database-url", "",
		"work directly on the database instead of over HTTP: postgres://… or sqlite:///path/kici.db (env KICI_DATABASE_URL)")
	var closeStore func() error
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		u := dbURL
		if u == "" {
			u = strings.TrimSpace(a.io.Getenv("KICI_DATABASE_URL"))
		}
		if u == "" {
			return nil
		}
		st, err := openDirectStore(c.Context(), u)
		if err != nil {
			return err
		}
		closeStore = st.Close
		cl, err := directClient(st)
		if err != nil {
			_ = st.Close()
			return err
		}
		a.client = cl
		return nil
	}
	cmd.PersistentPostRunE = func(*cobra.Command, []string) error {
		if closeStore != nil {
			return closeStore()
		}
		return nil
	}
}

// openDirectStore opens the database named by u without migrating it: the
// orchestrator owns the schema, so a database at another schema version
// than this binary's is refused.
func openDirectStore(ctx context.Context, u string) (store.Store, error) {
	var st store.Store
	var err error
	switch {
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		st, err = postgres.OpenCurrent(ctx, u)
	case strings.HasPrefix(u, "sqlite://"):
		path := strings.TrimPrefix(u, "sqlite://")
		if path == "" {
			return nil, errors.New("sqlite:// needs a path, e.g. sqlite:///var/lib/kici/kici.db")
		}
		st, err = sqlite.OpenCurrent(ctx, path)
	default:
		return nil, errors.New("the database URL must start with postgres://, postgresql:// or sqlite://")
	}
	var mismatch *sqlstore.SchemaMismatchError
	if errors.As(err, &mismatch) {
		return nil, fmt.Errorf("schema is at %d, this kici-admin expects %d; upgrade the orchestrator first", mismatch.Have, mismatch.Want)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	return st, nil
}

// directClient returns a Client whose requests are served in-process by the
// admin router over st.
func directClient(st store.Store) (*Client, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	tok := hex.EncodeToString(b)
	// Decisions are committed here; the orchestrator's resumer picks them
	// up (no kick: it runs in another process).
	h := api.NewRouter(api.Deps{Store: st, Auth: auth.NewAdminAuth(st, []string{tok}), Approvals: approval.NewDecider(st, nil)})
	return &Client{BaseURL: "http://direct.invalid", Token: tok, HTTP: &http.Client{Transport: handlerTransport{h}}}, nil
}

// handlerTransport serves requests with an in-process handler.
type handlerTransport struct{ h http.Handler }

// RoundTrip serves req with the handler and returns its recorded response.
func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	res := rec.Result()
	res.Request = req
	return res, nil
}
