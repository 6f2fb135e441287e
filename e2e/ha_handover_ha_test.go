//go:build ha

package e2e

// make test-ha goes round the two nodes three times.
func init() { handoverRounds = 3 }
