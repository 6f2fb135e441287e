//go:build ha

package e2e

// make test-ha goes round the three nodes three times.
func init() { drainRollRounds = 3 }
