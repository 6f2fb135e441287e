//go:build !linux

package runner

import (
	"errors"
	"syscall"
)

// NamespacedSupervisor returns prefix unchanged: namespaces are Linux only.
func NamespacedSupervisor(prefix, hide, shared []string) []string { return prefix }

// SandboxedSupervisor returns prefix unchanged: namespaces are Linux only.
func SandboxedSupervisor(prefix, hide, shared []string) []string { return prefix }

func namespaced([]string) bool                         { return false }
func sandboxed([]string) bool                          { return false }
func setViewNamespaces([]string, *syscall.SysProcAttr) {}

// ProbeNamespaces reports that namespaces are Linux only.
func ProbeNamespaces([]string) error { return errors.New("namespaces are Linux only") }
