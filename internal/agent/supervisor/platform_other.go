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

// NamespacesFlag and HideFlag exist on every system; only Linux honours
// them (see namespaces_linux.go).
const (
	NamespacesFlag = "--kici-namespaces"
	HideFlag       = "--kici-hide="
)

func setStepUserNamespace(*syscall.SysProcAttr, int, int) {}
func parseFlags(args []string) (bool, []string, []string) { return false, nil, args }
func enterNamespaces([]string) error                      { return errors.New("namespaces are Linux only") }
func hostID(string) int                                   { return 0 }
