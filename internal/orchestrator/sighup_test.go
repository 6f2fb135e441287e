package orchestrator

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"
)

// A SIGHUP that arrives once the endpoint file is written but before Run
// (a reload sent while the orchestrator starts) is held for Run, not
// delivered with its default action, which would end this process.
func TestSIGHUPBeforeRunIsHeldNotFatal(t *testing.T) {
	s, err := serverFor(t, t.TempDir(), "independent")
	if err != nil {
		t.Fatal(err)
	}
	defer s.cleanup.unwind(context.Background(), slog.New(slog.DiscardHandler))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case sig := <-s.hup:
		if sig != syscall.SIGHUP {
			t.Fatalf("held %v, want SIGHUP", sig)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the SIGHUP sent after New was not held for Run")
	}
}
