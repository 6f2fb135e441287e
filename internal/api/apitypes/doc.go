// Package apitypes holds the JSON shapes of kici's admin API: the request
// and response bodies both the orchestrator (package api) and the clients
// (kici-admin, kici) use. It imports nothing of the server, so a client
// links only these types, never the store or its drivers. Field names are
// camelCase, as in KiCI's admin API; store rows are converted into these
// types by package api and never served as they are.
package apitypes
