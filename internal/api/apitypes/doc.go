// Package apitypes holds the JSON shapes of kici's admin API: the request
// and response bodies both the orchestrator (package api) and the clients
// (kici-admin, kici) use. It imports nothing of the server, so a client
// links only these types, never the store or its drivers. Field names are
// camelCase, as in KiCI's admin API.
//
// A server row the API serves as it is (a cluster node, a registration, a
// context, a decision trace, …) has its one definition here, and the
// server's package declares it as an alias (store.ClusterNode =
// apitypes.ClusterNode), so the row and the served JSON cannot drift apart
// and package api writes the row without copying it. That is safe because
// such a type carries only served fields: a row with a field that must
// never be served (a delivery's payload, a sealed private key, a token or
// cookie hash) keeps a type of its own in the store, and package api copies
// it into the apitypes shape field by field, leaving that field behind.
// The server's vocabularies these shapes carry (event-log and notification
// delivery statuses, trigger kinds, context types, …) are named types of
// this package or of a leaf package it may import (runs/status,
// approval/hold, provider), for the same reason; the server's packages
// alias them under their own names (store.EventLogStatus, trigger.Kind).
package apitypes
