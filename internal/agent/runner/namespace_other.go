//go:build !linux

package runner

import (
	"errors"
	"syscall"
)

// NamespacedSupervisor returns prefix unchanged: namespaces are Linux only.
func NamespacedSupervisor(prefix []string, hide []string) []string { return prefix }

func namespaced([]string) bool                                      { return false }
func setSupervisorNamespaces(*syscall.SysProcAttr)                  {}
func setStepUserNamespace(*syscall.SysProcAttr, int, int)           {}
func parseSupervisorFlags(args []string) (bool, []string, []string) { return false, nil, args }
func enterNamespaces([]string) error                                { return errors.New("namespaces are Linux only") }

func hostID(string) int { return 0 }

// ProbeNamespaces reports that namespaces are Linux only.
func ProbeNamespaces([]string) error { return errors.New("namespaces are Linux only") }
