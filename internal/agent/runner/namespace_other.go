//go:build !linux

package runner

import (
	"errors"
	"syscall"
)

// NamespacedSupervisor returns prefix unchanged: namespaces are Linux only.
func NamespacedSupervisor(prefix []string, hide []string) []string { return prefix }

func namespaced([]string) bool                     { return false }
func setSupervisorNamespaces(*syscall.SysProcAttr) {}

// ProbeNamespaces reports that namespaces are Linux only.
func ProbeNamespaces([]string) error { return errors.New("namespaces are Linux only") }
