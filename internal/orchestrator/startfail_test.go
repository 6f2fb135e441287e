package orchestrator

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/testutil/wait"
)

// A start that fails late — the listen address taken, or the very last
// step (the endpoint file) failing after the listener is bound — releases
// everything it acquired: the data-directory lock, the SQLite database's
// files, the scaler's warm-pool loop and the listener. A second start on
// the same data directory then works.
func TestFailedStartReleasesWhatItAcquired(t *testing.T) {
	t.Run("listen address taken", func(t *testing.T) {
		dir := t.TempDir()
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		port := taken.Addr().(*net.TCPAddr).Port
		before := warmLoops()
		_, err = New(context.Background(), startCfg(t, dir, port), slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "listen on") {
			t.Fatalf("New on a taken port = %v, want a listen error", err)
		}
		wantReleased(t, dir, before)
	})

	t.Run("endpoint file cannot be written", func(t *testing.T) {
		dir := t.TempDir()
		// A non-empty directory where the endpoint file goes: the atomic
		// rename of the last startup step fails.
		if err := os.MkdirAll(filepath.Join(dir, config.EndpointFile, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		port := freePort(t)
		before := warmLoops()
		_, err := New(context.Background(), startCfg(t, dir, port), slog.New(slog.DiscardHandler))
		if err == nil {
			t.Fatal("New succeeded although the endpoint file cannot be written")
		}
		wantReleased(t, dir, before)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("the failed start still holds its listener: %v", err)
		}
		ln.Close()
	})
}

func startCfg(t *testing.T, dir string, port int) *config.Config {
	t.Helper()
	cfg, err := config.Load([]string{"KICI_DATA_DIR=" + dir, "KICI_HOST=127.0.0.1", "KICI_PORT=" + strconv.Itoa(port), "KICI_AGENT_BINARY=/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// wantReleased checks what a failed start must have given back.
func wantReleased(t *testing.T, dir string, warmBefore int) {
	t.Helper()
	lock, err := lockDataDir(dir)
	if err != nil {
		t.Errorf("data directory still locked: %v", err)
	} else {
		lock.Close()
	}
	if open := openFilesUnder(t, dir); len(open) > 0 {
		t.Errorf("files still open in the data directory: %v", open)
	}
	// The scaler's loop ends when it is shut down (asynchronously, on its
	// context): wait for it, bounded.
	wait.Until(10*time.Second, func() bool { return warmLoops() <= warmBefore })
	if n := warmLoops(); n > warmBefore {
		t.Errorf("%d scaler warm-pool loops left running (had %d before)", n, warmBefore)
	}
	// And a second start on the same directory works.
	cfg := startCfg(t, dir, 0)
	_ = os.RemoveAll(filepath.Join(dir, config.EndpointFile))
	s, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start after the failed one: %v", err)
	}
	s.cleanup.unwind(context.Background(), slog.New(slog.DiscardHandler))
}

// warmLoops counts the scaler warm-pool goroutines of this process.
func warmLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "scaler.(*Manager).warmLoop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// openFilesUnder lists this process's open file descriptors that point
// into dir (Linux /proc/self/fd).
func openFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("no /proc/self/fd to list open files (Linux): %v", err)
	}
	var out []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			out = append(out, target)
		}
	}
	return out
}
