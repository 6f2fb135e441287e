package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// startTogetherRounds is how many times TestHAThreeNodesStartTogetherOnEmptyDatabase
// starts three nodes at once: once in `make test`, ten times in `make
// test-ha` (ha_startup_long_test.go).
var startTogetherRounds = 1

// Three kici-orchestrator processes started at the same moment on one
// empty PostgreSQL database all start and become ready, and the schema is
// at this binary's version: the migration lock lets one node migrate while
// the others wait. Before it, 5 of 9 such starts crashed with "partial
// migration error … duplicate key … pg_type_typname_nsp_index".
func TestHAThreeNodesStartTogetherOnEmptyDatabase(t *testing.T) {
	for round := 1; round <= startTogetherRounds; round++ {
		db := "KICI_DATABASE_URL=" + pgtest.URL(t)
		var procs []*exec.Cmd
		var dirs []string
		for i := 0; i < 3; i++ {
			dir := t.TempDir()
			cmd := exec.Command(filepath.Join(binDir, "kici-orchestrator"))
			cmd.Env = append(cleanEnv(), "KICI_DATA_DIR="+dir, "KICI_PORT=0", db)
			log, err := os.Create(filepath.Join(dir, "orchestrator.log"))
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout, cmd.Stderr = log, log
			procs, dirs = append(procs, cmd), append(dirs, dir)
		}
		exited := make([]chan error, len(procs))
		for i, cmd := range procs { // as close together as exec allows
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited[i] = make(chan error, 1)
			go func() { exited[i] <- cmd.Wait() }()
		}
		for i, dir := range dirs {
			wait.For(t, 60*time.Second, "node to answer /ready 200", func() bool {
				select {
				case err := <-exited[i]:
					b, _ := os.ReadFile(filepath.Join(dir, "orchestrator.log"))
					t.Fatalf("round %d: node %d exited (%v) instead of starting:\n%s", round, i+1, err, b)
				default:
				}
				var ep struct {
					URL string `json:"url"`
				}
				b, err := os.ReadFile(filepath.Join(dir, "orchestrator.json"))
				if err != nil || json.Unmarshal(b, &ep) != nil || ep.URL == "" {
					return false
				}
				resp, err := http.Get(ep.URL + "/ready")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
		}
		for i, cmd := range procs {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited[i]:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited[i]
				t.Errorf("round %d: node %d did not stop within 30 s of SIGTERM", round, i+1)
			}
		}
		status := exec.Command(filepath.Join(binDir, "kici-orchestrator"), "migrate", "status")
		status.Env = append(cleanEnv(), "KICI_DATA_DIR="+dirs[0], db)
		if code, out := exitCode(t, status); code != 0 {
			t.Fatalf("round %d: schema after three concurrent starts: exit %d %s", round, code, out)
		}
	}
}
