package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/retention"
	"kici.dev/kici/internal/scheduler"
)

// NodeIDFile is the file in the data directory holding this node's id.
const NodeIDFile = "node-id"

// CatchUpWindowVar bounds the schedule catch-up of a node taking the
// scheduler lease (a Go duration; "off" disables catch-up).
const CatchUpWindowVar = "KICI_SCHEDULE_CATCHUP_WINDOW"

// nodeID returns this node's id, created once in <dataDir>/node-id (0600)
// and kept across restarts: the node holds its leases under it, so a node
// restarted after a crash takes its own unexpired leases back at once
// instead of waiting for their TTL.
func nodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, NodeIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read node id %s: %w", path, err)
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	id := host + "-" + uuid.NewString()[:8]
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write node id %s: %w (the data directory must be writable)", path, err)
	}
	return id, nil
}

// catchUpWindow reads KICI_SCHEDULE_CATCHUP_WINDOW: empty = the default
// (1 h), "off" or "0" = no catch-up, else a positive Go duration of at most
// 7 days (e.g. 30m, 6h).
func catchUpWindow(environ []string) (time.Duration, error) {
	raw := ""
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == CatchUpWindowVar {
			raw = strings.TrimSpace(v)
		}
	}
	switch raw {
	case "":
		return scheduler.DefaultCatchUpWindow, nil
	case "off", "0":
		return -1, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 || d > 7*24*time.Hour {
		return 0, fmt.Errorf("%s=%q: want a duration such as 30m or 6h (at most 168h), or off", CatchUpWindowVar, raw)
	}
	return d, nil
}

// releaseLeases drops the scheduler and retention leases this node holds,
// on a graceful stop, so another node (or this one restarted) takes them
// at its next tick instead of after their TTL.
func (s *Server) releaseLeases(ctx context.Context) {
	s.ingress.sched.Release(ctx)
	if err := s.store.ReleaseLease(ctx, retention.LeaseName, s.nodeID); err != nil {
		s.log.Warn("release retention lease", "err", err)
	}
}
