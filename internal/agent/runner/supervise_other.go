//go:build !linux

package runner

// becomeSubreaper is Linux-only; elsewhere the process group kill is all.
func becomeSubreaper() {}
