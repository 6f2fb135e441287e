//go:build !linux

package supervisor

import (
	"errors"
	"syscall"
)

// becomeSubreaper is Linux-only; elsewhere the process group kill is all.
func becomeSubreaper() {}

// SetDeathSignal is a no-op where the kernel has no parent-death signal.
func SetDeathSignal(*syscall.SysProcAttr) {}

func setStepUserNamespace(*syscall.SysProcAttr, int, int) {}
func enterView(view) error                                { return errors.New("namespaces are Linux only") }
func hostID(string) int                                   { return 0 }
