package cli

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// serverPackages are what a client must not link: the admin router, the
// store implementations and database drivers, and the orchestrator's
// engine packages. An entry ending in "/" stands for every package under
// it; the others are single packages (internal/runs/status, the leaf
// package of status words, is allowed).
var serverPackages = []string{
	"kici.dev/kici/internal/api", "kici.dev/kici/internal/store/", "kici.dev/kici/internal/orchestrator",
	"kici.dev/kici/internal/ingest", "kici.dev/kici/internal/dispatch", "kici.dev/kici/internal/runs",
	"kici.dev/kici/internal/logstore", "kici.dev/kici/internal/approval", "github.com/jackc/pgx/", "modernc.org/sqlite",
}

// TestClientLinksNoServerPackage lists what kici-admin, as `go build` and
// `make build` produce it, links and fails on any server package: the admin
// client speaks HTTP and decodes apitypes, and hands direct-database mode to
// `kici-orchestrator admin`.
func TestClientLinksNoServerPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "kici.dev/kici/cmd/kici-admin").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "kici.dev/kici/internal/cli") || !slices.Contains(deps, "kici.dev/kici/internal/api/apitypes") {
		t.Fatalf("go list did not list the client's packages:\n%s", out)
	}
	for _, d := range deps {
		for _, p := range serverPackages {
			if d == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(d, p)) {
				t.Errorf("kici-admin links %s", d)
			}
		}
	}
}

// With neither OpenDatabase nor DelegateDirect, --database-url is refused
// with a message saying what to do instead, and nothing is called.
func TestDatabaseURLRefusedWithoutDirectMode(t *testing.T) {
	var out, errb bytes.Buffer
	env := map[string]string{"KICI_ADMIN_URL": "http://127.0.0.1:1", "KICI_DATABASE_URL": "sqlite:///nonexistent/kici.db"}
	code := Run(context.Background(), []string{"context", "list", "--org", "acme"}, IO{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	if code == 0 || !strings.Contains(errb.String(), "built without direct-database mode") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
