package api

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"kici.dev/kici/internal/store"
)

// notificationAnswers drives the notification routes: a webhook
// subscription gets a generated secret answered once and never listed,
// a Slack URL is listed without its path, a test message is queued in
// the outbox and listed with its delivery state, and delete removes both.
func (e *answersEnv) notificationAnswers(t *testing.T) {
	c, p := e.c, "/api/v1/admin"
	created := c.call("POST", p+"/notifications", `{"orgId":"acme","workflowName":"ci","outcomes":["failed","fixed"],"channel":"webhook","target":"https://hooks.acme.test/kici"}`)
	id, _ := created["id"].(string)
	secret, _ := created["secret"].(string)
	if id == "" || len(secret) < 32 {
		t.Fatalf("created webhook subscription: %v", created)
	}
	c.call("POST", p+"/notifications", `{"orgId":"acme","channel":"slack","target":"https://hooks.slack.test/services/T0/B0/XSECRET"}`)
	list := c.call("GET", p+"/notifications?orgId=acme", "")
	subs, _ := list["notifications"].([]any)
	if len(subs) != 2 {
		t.Fatalf("listed %v", list)
	}
	for _, s := range subs {
		m := s.(map[string]any)
		if strings.Contains(m["target"].(string), "XSECRET") || m["secret"] != nil {
			t.Errorf("listing shows a credential: %v", m)
		}
	}
	// Listed by creation time then id: two made in the same millisecond
	// may come in either order, so the Slack one is found by its channel.
	slack := 0
	for _, s := range subs {
		if m := s.(map[string]any); m["channel"] == "slack" {
			slack++
			if len(m["outcomes"].([]any)) != 4 {
				t.Errorf("no outcomes given should select all four: %v", m)
			}
		}
	}
	if slack != 1 {
		t.Errorf("listed %d Slack subscriptions, want 1: %v", slack, list)
	}
	queued := c.call("POST", p+"/notifications/"+id+"/test", "")
	rows := c.call("GET", p+"/notification-deliveries?subscriptionId="+id, "")
	ds, _ := rows["deliveries"].([]any)
	if len(ds) != 1 || ds[0].(map[string]any)["id"] != queued["deliveryId"] || ds[0].(map[string]any)["status"] != "pending" ||
		ds[0].(map[string]any)["outcome"] != "test" {
		t.Errorf("deliveries after a test: %v", rows)
	}
	c.call("DELETE", p+"/notifications/"+id, "")
	if left, _ := e.st.ListNotificationDeliveries(context.Background(), store.NotificationDeliveryFilter{SubscriptionID: id}); len(left) != 0 {
		t.Errorf("outbox rows left after delete: %d", len(left))
	}
}

// TestNotificationRoutesRefuseBadInput: bad subscriptions answer 400 with
// the reason and store nothing; unknown ids answer 404.
func TestNotificationRoutesRefuseBadInput(t *testing.T) {
	e := newAnswersEnv(t)
	for body, want := range map[string]string{
		`{"orgId":"acme","channel":"pager","target":"https://x.test/h"}`:                     "unknown channel",
		`{"orgId":"acme","channel":"slack","target":"https://x.test/h","outcomes":["boom"]}`: "unknown outcome",
		`{"orgId":"acme","channel":"webhook","target":"https://x.test/h","secret":"short"}`:  "at least 16",
		`{"orgId":"acme","channel":"email","target":"nobody"}`:                               "email addresses",
		`{"orgId":"acme","channel":"slack","target":"https://x.test/h","sourceId":"nope"}`:   "not found",
	} {
		code, got := e.c.raw("POST", "/api/v1/admin/notifications", body)
		if code/100 != 4 || !strings.Contains(got, want) {
			t.Errorf("%s: %d %s, want a 4xx saying %q", body, code, got, want)
		}
	}
	if l, _ := e.st.ListNotificationSubscriptions(context.Background(), ""); len(l) != 0 {
		t.Errorf("refused bodies stored %d subscriptions", len(l))
	}
	if code, _ := e.c.raw("DELETE", "/api/v1/admin/notifications/nope", ""); code != 404 {
		t.Errorf("delete unknown: %d", code)
	}
	if code, _ := e.c.raw("POST", "/api/v1/admin/notifications/nope/test", ""); code != 404 {
		t.Errorf("test unknown: %d", code)
	}
}

// raw sends a request with c's token and returns the status and body,
// without validating (for error answers).
func (c *answerChecker) raw(method, path, body string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
