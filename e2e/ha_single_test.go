//go:build ha

package e2e

import (
	"testing"

	"kici.dev/kici/internal/testutil/pgtest"
)

// The single-node schedule restart test on PostgreSQL (make test-ha; make
// test runs it on SQLite): the lease and the fires live in the shared
// database, so this is the path every cluster node takes.
func TestHAScheduleSurvivesGracefulAndKill9RestartsPostgres(t *testing.T) {
	testScheduleSurvivesRestarts(t, "KICI_DATABASE_URL="+pgtest.URL(t))
}
