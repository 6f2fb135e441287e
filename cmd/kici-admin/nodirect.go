//go:build kici_client_only

package main

import (
	"context"
	"net/http"
)

// openDatabase is nil in a client-only build: --database-url is refused and
// no server package is linked (see direct.go).
var openDatabase func(ctx context.Context, databaseURL string) (http.RoundTripper, string, func() error, error)
