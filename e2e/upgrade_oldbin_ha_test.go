//go:build ha

package e2e

// make test-ha pushes more runs through each node at each upgrade step.
func init() { upgradeLoad = 6 }
