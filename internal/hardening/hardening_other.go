//go:build !linux

package hardening

func noDump() error { return nil }

func dumpable() (bool, error) { return true, nil }
