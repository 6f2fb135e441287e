// Package direct is kici-admin's direct-database mode (KiCI `kici-admin
// context` with --database-url / KICI_DATABASE_URL): it opens the database
// itself and serves the very same admin routes in-process, so validation,
// status codes and access-log rows are identical to the HTTP API's. It is
// the only part of kici-admin that links the server (package api, the
// store and the SQLite and PostgreSQL drivers); package cli reaches it
// only through cli.IO.OpenDatabase, so a client built without it links
// none of them.
//
// Database access is full access: the in-process caller is an owner
// recorded as token "direct" labelled "direct: <os user>@<host>" in the
// access log (and as service:direct on hold decisions), authenticated with
// a random token that lives only in memory.
package direct

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"strconv"
	"strings"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/store/sqlstore"
)

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

// Open opens (never migrates) the database named by databaseURL
// (postgres://…, postgresql://… or sqlite:///path) and returns a transport
// answering admin API requests in-process, the bearer token it accepts,
// and the function that closes the database. A database at another schema
// version than this binary's is refused: "schema is at N, this kici-admin
// expects M; upgrade the orchestrator first".
func Open(ctx context.Context, databaseURL string) (http.RoundTripper, string, func() error, error) {
	st, err := openDirectStore(ctx, databaseURL)
	if err != nil {
		return nil, "", nil, err
	}
	rt, tok, err := serve(st)
	if err != nil {
		_ = st.Close()
		return nil, "", nil, err
	}
	return rt, tok, st.Close, nil
}

// serve returns a transport whose requests are served in-process by the
// admin router over st, and the token it accepts.
func serve(st store.Store) (http.RoundTripper, string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, "", err
	}
	tok := hex.EncodeToString(b)
	// Decisions are committed here; the orchestrator's resumer picks them
	// up (no kick: it runs in another process).
	a := auth.InProcessOwner(st, tok, DirectTokenID, "direct: "+caller())
	h := api.NewRouter(api.Deps{Store: st, Auth: a, Approvals: approval.NewDecider(st, nil)})
	return handlerTransport{h}, tok, nil
}

// DirectTokenID is the token id the access log records for a
// direct-database caller.
const DirectTokenID = "direct"

// caller names who runs this process, "alice@build-1" (the login from the
// operating system's user database, else $USER, else the uid).
func caller() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "uid " + strconv.Itoa(os.Getuid())
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return name
	}
	return name + "@" + host
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
