//go:build !kici_client_only

package main

import "kici.dev/kici/internal/cli/direct"

// openDatabase serves --database-url (direct-database mode). It links the
// admin router, the store and both database drivers into kici-admin; build
// with -tags kici_client_only for a client without them (nodirect.go).
var openDatabase = direct.Open
