package agent

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/supervisor"
	"kici.dev/kici/internal/testutil/wait"
)

func waitFile(t *testing.T, p string) {
	t.Helper()
	wait.For(t, 10*time.Second, "file "+p+" to be written", func() bool {
		b, err := os.ReadFile(p)
		return err == nil && len(strings.TrimSpace(string(b))) > 0
	})
}

func readPid(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// groupAlive reports whether any non-zombie process is in process group
// pgid (zombies are ignored: an orphan may wait for a non-reaping init).
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	alive := false
	supervisor.EachLiveProcess(func(_, _, pgrp int) { alive = alive || pgrp == pgid })
	return alive
}
