package scaler

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestBareMetalReportsAgentsLostWithThePreviousProcess: pid files left by a
// previous orchestrator name their agents; those whose process is gone (or
// whose pid now belongs to another process) are reported once and their
// files removed, a running one is not.
func TestBareMetalReportsAgentsLostWithThePreviousProcess(t *testing.T) {
	dir := t.TempDir()
	b := NewBareMetal(BareMetalOptions{LogDir: dir}, nil)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	b.writePidFile("scaler-bare-metal-dead", dead.Process.Pid)
	b.writePidFile("scaler-bare-metal-live", os.Getpid())
	// Same pid as a live process, another start time: a reused pid.
	reused := fmt.Sprintf("%d %d\n", os.Getpid(), procStartTime(os.Getpid())+1)
	if err := os.WriteFile(filepath.Join(dir, "scaler-bare-metal-reused.pid"), []byte(reused), 0o600); err != nil {
		t.Fatal(err)
	}
	lost := b.LostAtStart()
	slices.Sort(lost)
	if !slices.Equal(lost, []string{"scaler-bare-metal-dead", "scaler-bare-metal-reused"}) {
		t.Fatalf("lost %v", lost)
	}
	if again := b.LostAtStart(); len(again) != 0 {
		t.Fatalf("reported twice: %v", again)
	}
	if _, err := os.Stat(filepath.Join(dir, "scaler-bare-metal-live.pid")); err != nil {
		t.Fatal("the running agent's pid file was removed")
	}
}
