package membership

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
)

// NodeIDFile is the file in the data directory holding this node's id.
const NodeIDFile = "node-id"

// LoadNodeID returns this node's id, created once in <dataDir>/node-id (0600)
// and kept across restarts: the node holds its leases under it, so a node
// restarted after a crash takes its own unexpired leases back at once
// instead of waiting for their TTL. Errors: the file unreadable, or the
// data directory not writable.
func LoadNodeID(dataDir string) (string, error) {
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
