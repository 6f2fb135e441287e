package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Names of the files a local orchestrator keeps in its data directory.
const (
	// EndpointFile holds {"url": "...", "pid": N}, written after listen.
	EndpointFile = "orchestrator.json"
	// AdminTokenFile holds the plaintext bootstrap owner token.
	AdminTokenFile = "admin-token"
)

// Endpoint is the content of EndpointFile.
type Endpoint struct {
	// URL is the orchestrator's base URL, e.g. "http://127.0.0.1:4000".
	URL string `json:"url"`
	// PID is the orchestrator's process id.
	PID int `json:"pid"`
}

// WriteLocalEndpoint writes <dataDir>/orchestrator.json (mode 0600, atomic
// rename) so that kici-admin on this host finds the orchestrator. The data
// directory is created (0700) if missing.
func WriteLocalEndpoint(dataDir, url string, pid int) error {
	data, err := json.Marshal(Endpoint{URL: url, PID: pid})
	if err != nil {
		return err
	}
	return writeFileAtomic(dataDir, EndpointFile, append(data, '\n'))
}

// WriteAdminToken writes the plaintext bootstrap owner token to
// <dataDir>/admin-token (mode 0600, atomic rename).
func WriteAdminToken(dataDir, token string) error {
	return writeFileAtomic(dataDir, AdminTokenFile, []byte(token+"\n"))
}

// ReadAdminToken returns the token in <dataDir>/admin-token (trimmed), or an
// error wrapping os.ErrNotExist when the file is missing.
func ReadAdminToken(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, AdminTokenFile))
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", filepath.Join(dataDir, AdminTokenFile))
	}
	return tok, nil
}

// RemoveLocalEndpoint deletes <dataDir>/orchestrator.json if it still names
// pid (so a newer orchestrator's file is left alone). Missing file is not an
// error.
func RemoveLocalEndpoint(dataDir string, pid int) error {
	p := filepath.Join(dataDir, EndpointFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var ep Endpoint
	if json.Unmarshal(b, &ep) == nil && ep.PID != pid {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ReadLocalEndpoint reads <dataDir>/orchestrator.json and
// <dataDir>/admin-token and returns the orchestrator URL and admin token.
// Errors: "no orchestrator found in <dir>: start kici-orchestrator or pass
// --url/--token" when orchestrator.json is missing or names a process that no
// longer runs; a similar message when admin-token is missing; parse errors.
func ReadLocalEndpoint(dataDir string) (url, token string, err error) {
	p := filepath.Join(dataDir, EndpointFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("no orchestrator found in %s: start kici-orchestrator or pass --url/--token", dataDir)
	} else if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", p, err)
	}
	var ep Endpoint
	if err := json.Unmarshal(b, &ep); err != nil || ep.URL == "" {
		if err == nil {
			err = errors.New("no url")
		}
		return "", "", fmt.Errorf("%s is malformed (%v): start kici-orchestrator or pass --url/--token", p, err)
	}
	if ep.PID > 0 && !processAlive(ep.PID) {
		return "", "", fmt.Errorf("no orchestrator found in %s (process %d recorded in %s is not running): start kici-orchestrator or pass --url/--token", dataDir, ep.PID, EndpointFile)
	}
	tok, err := ReadAdminToken(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("no admin token found in %s (missing %s): pass --token or set KICI_ADMIN_TOKEN", dataDir, AdminTokenFile)
	} else if err != nil {
		return "", "", fmt.Errorf("reading admin token: %w", err)
	}
	return ep.URL, tok, nil
}

// processAlive reports whether a process with pid exists (EPERM counts as
// alive: it exists but belongs to another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// writeFileAtomic writes dir/name with mode 0600 through a temporary file
// and a rename, creating dir (0700) when missing.
func writeFileAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
