package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// kici-admin diagnose prints every section and no credential: not the
// admin token in use, not a password in a failed delivery's error, not a
// URL's password.
func TestDiagnoseRedactsCredentials(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	d := &store.Delivery{ID: "d-fail", OrgID: "acme", Event: "push", Payload: []byte(`{}`), ReceivedAt: time.Now().UTC()}
	if err := h.st.AcceptDelivery(ctx, d, &store.EventLogEntry{OrgID: "acme", Event: "push", Source: "direct", Provider: provider.GitHub}); err != nil {
		t.Fatal(err)
	}
	msg := `clone postgres://kici:s3cr3t-pw@db:5432/kici failed; password=hunter2 token: ghp_abcdef123456 ` + h.token
	if err := h.st.FinishDeliveryOutcome(ctx, "d-fail", store.DeliveryFailed, msg, nil, store.EventOutcome{Status: store.EventLogFailed}); err != nil {
		t.Fatal(err)
	}
	out := h.mustRun("diagnose")
	for _, section := range []string{"== version", "== database", "== nodes", "== scalers", "== queue depth", "== recent errors", "d-fail"} {
		if !strings.Contains(out, section) {
			t.Errorf("diagnose lacks %q:\n%s", section, out)
		}
	}
	for _, secret := range []string{h.token, "s3cr3t-pw", "hunter2", "ghp_abcdef123456"} {
		if strings.Contains(out, secret) {
			t.Errorf("diagnose prints the credential %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "postgres://kici:[REDACTED]@db") {
		t.Errorf("URL password not redacted in place:\n%s", out)
	}
}
