package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/testutil/wait"
)

// hookReceiver is a loopback webhook endpoint: it answers 503 while down,
// and otherwise records the events whose signature verifies.
type hookReceiver struct {
	secret string
	mu     sync.Mutex
	down   bool
	events []string // "<event> <body>"
	bad    int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
		return
	}
	if err := notify.Verify(h.secret, r.Header.Get(notify.SignatureHeader), r.Header.Get(notify.TimestampHeader), body, time.Now(), 0); err != nil {
		h.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	h.events = append(h.events, r.Header.Get(notify.EventHeader)+" "+string(body))
}

func (h *hookReceiver) got(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

type deliveryRows struct {
	Deliveries []struct {
		RunID, Outcome, Status, LastError string
		Attempts                          int
	} `json:"deliveries"`
}

// TestNotifyFailedRunSignedWebhookSurvivesRestart: a subscription made
// with kici-admin is told, over a signed webhook, that a run failed; the
// receiver is down when the run ends, the orchestrator restarts in
// between, and the stored outbox row is delivered once the receiver is
// back. kici-admin shows the attempts, and a test message goes through.
func TestNotifyFailedRunSignedWebhookSurvivesRestart(t *testing.T) {
	const secret = "e2e-signing-secret-0123456789"
	h := &hookReceiver{secret: secret, down: true}
	recv := httptest.NewServer(h)
	defer recv.Close()
	dataDir, port := t.TempDir(), freePort(t)
	o := startOrchestratorAt(t, dataDir, port, loopbackSourcesEnv)

	out := o.admin(t, "notification", "add", "--org", "acme", "--workflow", "build", "--channel", "webhook", "--target", recv.URL+"/hook",
		"--secret", secret, "--outcomes", "failed,fixed")
	subID := strings.TrimSuffix(strings.Fields(out)[1], ":")
	if !strings.HasPrefix(out, "subscription ") || subID == "" {
		t.Fatalf("notification add printed %q", out)
	}
	if list := o.admin(t, "notification", "list", "--org", "acme"); !strings.Contains(list, subID) || !strings.Contains(list, "failed,fixed") ||
		strings.Contains(list, secret) {
		t.Errorf("notification list:\n%s", list)
	}

	repo := repoWithWorkflow(t, `name: build
on: {push: {branches: [main]}}
jobs:
  test:
    steps:
      - run: echo broken; exit 1
`)
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	if r := o.waitRunStatus(t, runID, 2*time.Minute, "failed", "success", "cancelled"); r.Status != "failed" {
		t.Fatalf("run ended %s, want failed", r.Status)
	}
	rowsPath := "/api/v1/admin/notification-deliveries?subscriptionId=" + subID
	wait.For(t, 30*time.Second, "a refused first attempt", func() bool {
		var rows deliveryRows
		o.get(t, rowsPath, &rows)
		return len(rows.Deliveries) == 1 && rows.Deliveries[0].Attempts >= 1 && strings.Contains(rows.Deliveries[0].LastError, "503")
	})
	if shown := o.admin(t, "notification", "deliveries", "--subscription", subID); !strings.Contains(shown, "pending") || !strings.Contains(shown, "503") {
		t.Errorf("deliveries while the receiver is down:\n%s", shown)
	}

	o.stop(t)
	h.mu.Lock()
	h.down = false
	h.mu.Unlock()
	o = startOrchestratorAt(t, dataDir, port, loopbackSourcesEnv)
	wait.For(t, 60*time.Second, "the failed run's notification after the restart", func() bool { return len(h.got("run.failed")) > 0 })
	if got := h.got("run.failed"); len(got) != 1 || !strings.Contains(got[0], `"runId":"`+runID+`"`) || !strings.Contains(got[0], `"workflowName":"build"`) {
		t.Errorf("received %q", got)
	}
	if shown := o.admin(t, "notification", "deliveries", "--subscription", subID); !strings.Contains(shown, "delivered") {
		t.Errorf("deliveries after the retry:\n%s", shown)
	}

	o.admin(t, "notification", "test", subID)
	wait.For(t, 30*time.Second, "the test message", func() bool { return len(h.got("run.test")) == 1 })
	o.admin(t, "notification", "remove", subID)
	if list := o.admin(t, "notification", "list"); strings.Contains(list, subID) {
		t.Errorf("removed subscription still listed:\n%s", list)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bad != 0 {
		t.Errorf("%d requests failed signature verification", h.bad)
	}
}
