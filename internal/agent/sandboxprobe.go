package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"kici.dev/kici/internal/agent/runner"
)

// A root agent checks at start that the job sandbox works on its host
// (runner.ProbeNamespaces: one sandboxed step), which costs a process
// start and a handful of mounts: 5–20 ms, paid by every agent spawned for
// one job, before the job's first step. What the probe finds depends only
// on the host as booted, the supervisor and the agent's capabilities, so a
// success is noted in the work directory and the next agent with the same
// boot, supervisor prefix, supervisor binary and capabilities skips it.
// A note that lies can make a step fail to start, never run it outside
// its sandbox: each step still sets its sandbox up and fails if it cannot.

// sandboxNoteFile is the note's name in the agent's work directory.
const sandboxNoteFile = ".kici-sandbox-probed"

// probeNamespaces is runner.ProbeNamespaces (a variable for tests).
var probeNamespaces = runner.ProbeNamespaces

// probeSandbox runs the sandbox probe for prefix unless dir holds a note,
// written by root and writable by root only, of a success under the same
// conditions (sandboxProbeKey); a success writes that note. dir "" always
// probes and notes nothing.
func probeSandbox(dir string, prefix []string) error {
	key, keyErr := sandboxProbeKey(prefix)
	note := filepath.Join(dir, sandboxNoteFile)
	if dir != "" && keyErr == nil && trustedNote(note, key) {
		return nil
	}
	if err := probeNamespaces(prefix); err != nil {
		return err
	}
	if dir != "" && keyErr == nil {
		// Best effort: without the note the next agent probes again.
		tmp := fmt.Sprintf("%s.%d", note, os.Getpid())
		if os.WriteFile(tmp, []byte(key), 0o600) == nil && os.Rename(tmp, note) != nil {
			_ = os.Remove(tmp)
		}
	}
	return nil
}

// trustedNote reports whether the note at path says key and only root
// can have written it (owned by root, not writable by group or others).
func trustedNote(path, key string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 || os.Geteuid() != 0 {
		return false
	}
	b, err := os.ReadFile(path)
	return err == nil && string(b) == key
}

// sandboxProbeKey names the conditions a probe's result holds for: the
// host's boot (/proc/sys/kernel/random/boot_id), the supervisor prefix,
// its binary's size and modification time, and the agent's effective
// capabilities.
func sandboxProbeKey(prefix []string) (string, error) {
	if len(prefix) == 0 {
		return "", fmt.Errorf("no supervisor")
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(prefix[0])
	if err != nil {
		return "", err
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	capEff := ""
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			capEff = line
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s\x00%d", strings.TrimSpace(string(boot)), strings.Join(prefix, "\x00"),
		fi.Size(), fi.ModTime().UnixNano(), capEff, os.Geteuid())
	return hex.EncodeToString(h.Sum(nil)), nil
}
