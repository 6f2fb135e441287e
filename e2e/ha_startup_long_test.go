//go:build ha

package e2e

// `make test-ha` (build tag ha) starts the three nodes together ten times.
func init() { startTogetherRounds = 10 }
