package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A successful sandbox probe is noted in the work directory, and the next
// agent with the same supervisor skips it (as root: only a note root alone
// can have written counts); another supervisor prefix, a failed probe, a
// note whose content changed or one others may write probe again.
func TestSandboxProbeNotedOnceAndTrustedOnlyFromRoot(t *testing.T) {
	probes := 0
	fail := false
	probeNamespaces = func([]string) error {
		probes++
		if fail {
			return errors.New("no mount namespace")
		}
		return nil
	}
	t.Cleanup(func() { probeNamespaces = realProbe })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prefix := []string{self, "--sandbox"}
	note := filepath.Join(dir, sandboxNoteFile)
	asRoot := os.Geteuid() == 0

	expect := func(what string, wantProbes int) {
		t.Helper()
		if err := probeSandbox(dir, prefix); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if probes != wantProbes {
			t.Fatalf("%s: %d probes, want %d", what, probes, wantProbes)
		}
	}
	expect("first agent", 1)
	fi, err := os.Stat(note)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("note after a success: %v, %v", fi, err)
	}
	if asRoot {
		expect("second agent, same conditions", 1)
	} else {
		expect("second agent, not root: the note is not trusted", 2)
	}
	base := probes

	prefix = []string{self, "--sandbox", "--hide=/srv"}
	expect("another supervisor prefix", base+1)
	if asRoot {
		expect("that prefix again", base+1)
	}
	base = probes

	if err := os.WriteFile(note, []byte("forged"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect("a note with other content", base+1)
	base = probes
	if err := os.Chmod(note, 0o666); err != nil {
		t.Fatal(err)
	}
	expect("a note others may write", base+1)
	base = probes

	fail = true
	prefix = []string{self, "--other"}
	if err := probeSandbox(dir, prefix); err == nil || probes != base+1 {
		t.Fatalf("failed probe: err %v, %d probes", err, probes)
	}
	if err := probeSandbox(dir, prefix); err == nil || probes != base+2 {
		t.Fatalf("a failure is not noted: err %v, %d probes", err, probes)
	}
	fail = false
	if err := probeSandbox("", prefix); err != nil || probes != base+3 {
		t.Fatalf("no directory: err %v, %d probes", err, probes)
	}
}

var realProbe = probeNamespaces
