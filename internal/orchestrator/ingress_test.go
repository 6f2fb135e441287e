package orchestrator

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/wait"
)

func serverFor(t *testing.T, dataDir, mode string) (*Server, error) {
	t.Helper()
	cfg, err := config.Load([]string{"KICI_DATA_DIR=" + dataDir, "KICI_PORT=0", "KICI_MODE=" + mode, "KICI_AGENT_BINARY=/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	return New(context.Background(), cfg, slog.New(slog.DiscardHandler))
}

// The GitHub route is served in independent, observed and hybrid modes and
// not in platform mode; the generic route is served in all of them.
func TestGitHubRouteByMode(t *testing.T) {
	for _, c := range []struct {
		mode   string
		served bool
	}{{"independent", true}, {"observed", true}, {"hybrid", true}, {"platform", false}} {
		t.Run(c.mode, func(t *testing.T) {
			s, err := serverFor(t, t.TempDir(), c.mode)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			defer func() { cancel(); <-done }()
			post := func(path string) (int, string) {
				var resp *http.Response
				var err error
				wait.Until(10*time.Second, func() bool {
					resp, err = http.Post(s.URL()+path, "application/json", strings.NewReader(`{}`))
					return err == nil
				})
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			code, body := post("/webhook/acme/github/00000000-0000-0000-0000-000000000000")
			if served := strings.Contains(body, `"source not found"`); code != 404 || served != c.served {
				t.Fatalf("GitHub route in %s mode: %d %q; served=%v, want %v", c.mode, code, body, served, c.served)
			}
			if code, body := post("/webhook/acme/generic/none"); code != 404 || !strings.Contains(body, `"source not found"`) {
				t.Fatalf("generic route in %s mode: %d %q", c.mode, code, body)
			}
		})
	}
}

// An observed orchestrator refuses to start while a GitHub-App source
// exists; a token source does not stop it.
func TestObservedRefusesExistingAppSources(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.CreateSource(ctx, &store.Source{ID: "tok", OrgID: "acme", Name: "tok", Provider: provider.GitHub, RoutingKey: "github:token:tok", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	s, err := serverFor(t, dir, "observed")
	if err != nil {
		t.Fatalf("observed with a token source: %v", err)
	}
	s.cleanup.unwind(ctx, slog.New(slog.DiscardHandler))

	st, _ = sqlite.Open(ctx, filepath.Join(dir, "kici.db"))
	if err := st.CreateSource(ctx, &store.Source{ID: "app", OrgID: "acme", Name: "app", Provider: provider.GitHub, RoutingKey: "github:4242", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := serverFor(t, dir, "observed"); err == nil || !strings.Contains(err.Error(), `GitHub App source "app"`) {
		t.Fatalf("observed with an App source: err = %v", err)
	}
	s, err = serverFor(t, dir, "independent")
	if err != nil {
		t.Fatalf("independent with an App source: %v", err)
	}
	s.cleanup.unwind(ctx, slog.New(slog.DiscardHandler))
}
