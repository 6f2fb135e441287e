package orchestrator

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestDataDirLockRefusesASecondOrchestrator(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if err == nil {
		t.Fatal("second lock on the same data dir succeeded")
	}
	if !strings.Contains(err.Error(), "in use by another kici-orchestrator") || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error %q should name the holder and say what to do", err)
	}
	first.Close()
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()
}
