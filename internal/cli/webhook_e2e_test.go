package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/webhook"
)

// TestTriggerLocalRealWebhook posts through the real generic webhook handler:
// the signature must verify and the delivery must be persisted with the push
// payload.
func TestTriggerLocalRealWebhook(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := auth.NewAdminAuth(st, nil)
	tok, err := a.EnsureOwnerToken(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	var submitted []string
	mux := api.NewRouter(api.Deps{Store: st, Auth: a, Logs: logstore.NewFS(filepath.Join(dir, "logs"))})
	mux.Handle("POST /webhook/{orgId}/generic/{name}", webhook.NewGenericHandler(st, webhook.SubmitFunc(func(d *store.Delivery) {
		submitted = append(submitted, d.ID)
	}), nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	h := &harness{t: t, st: st, srv: srv, token: tok}

	repo, first, second := newRepo(t)
	id := h.addLocalSource(repo, "app")
	out := h.mustRun("source", "trigger-local", id)
	if len(submitted) != 1 || !strings.Contains(out, submitted[0]) {
		t.Fatalf("submitted %v, output %q", submitted, out)
	}
	d, err := st.GetDelivery(ctx, submitted[0])
	if err != nil {
		t.Fatal(err)
	}
	var p LocalPushPayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if d.Event != "push" || p.After != second || p.Before != first || p.Repository.Path != repo {
		t.Fatalf("delivery %+v payload %+v", d, p)
	}
}
