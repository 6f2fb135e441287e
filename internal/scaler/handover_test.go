package scaler

import (
	"os"
	"testing"
)

// A process in this process's own cgroup dies with it under systemd
// (INVOCATION_ID set): it must not be handed over. Outside systemd, or for
// a process elsewhere, nothing stops a handover.
func TestDiesWithOrchestratorUnderSystemdSameCgroup(t *testing.T) {
	if os.Getpid() == 1 {
		t.Skip("the test process is PID 1")
	}
	t.Setenv("INVOCATION_ID", "")
	if why := diesWithOrchestrator(os.Getpid()); why != "" {
		t.Errorf("outside systemd: %q, want no reason", why)
	}
	t.Setenv("INVOCATION_ID", "0123456789abcdef")
	if why := diesWithOrchestrator(os.Getpid()); why == "" {
		t.Error("under systemd, a process in the same cgroup: no reason given, want one")
	}
}
