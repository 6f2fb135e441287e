package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// orchestratorBinary runs direct-database mode: kici-admin is a pure HTTP
// client and links no server package, so a command given --database-url or
// KICI_DATABASE_URL is handed to `kici-orchestrator admin`, the same command
// tree with the admin router, the store and the database drivers compiled in.
const orchestratorBinary = "kici-orchestrator"

// findOrchestrator returns the kici-orchestrator next to the running
// executable (where make install and the container image put it),
// else the first one on PATH; the error names the binary to install.
func findOrchestrator() (string, error) {
	if self, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		p := filepath.Join(filepath.Dir(self), orchestratorBinary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(orchestratorBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("direct-database mode (--database-url, KICI_DATABASE_URL) runs in %s, found neither next to kici-admin nor on PATH: install %s (it serves `%s admin …`), or call the orchestrator over --url instead",
		orchestratorBinary, orchestratorBinary, orchestratorBinary)
}

// delegateDirect replaces this process with `kici-orchestrator admin <args>`
// (same arguments, environment, standard streams and so exit code). It
// returns only when the binary is missing or cannot be executed.
func delegateDirect(args []string) error {
	bin, err := findOrchestrator()
	if err != nil {
		return err
	}
	argv := append([]string{orchestratorBinary, "admin"}, args...)
	if err := syscall.Exec(bin, argv, os.Environ()); err != nil {
		return fmt.Errorf("direct-database mode: exec %s admin: %w", bin, err)
	}
	return nil
}
