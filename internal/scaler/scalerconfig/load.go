package scalerconfig

import (
	"os"
	"path/filepath"
)

// LoadConfig returns the scaler configuration: path and dir (dir "" ⇒
// <dir of path>/scalers.d when it exists) when path is set, else the
// embedded default with maxAgents agents.
func LoadConfig(path, dir string, maxAgents int) (*Config, error) {
	if path == "" {
		return DefaultConfig(maxAgents), nil
	}
	if dir == "" {
		d := filepath.Join(filepath.Dir(path), "scalers.d")
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dir = d
		}
	}
	return Load(path, dir)
}
