package notify_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestNotifyTwoNodesOnPostgresSendEachMessageOnce: two notifiers (two
// nodes of a cluster, each with its own connection pool) on one
// PostgreSQL database observe the same failed runs; every outcome is
// queued once and delivered once.
func TestNotifyTwoNodesOnPostgresSendEachMessageOnce(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	var nodes []store.Store
	for range 2 {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		nodes = append(nodes, s)
	}
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	if err := nodes[0].CreateNotificationSubscription(ctx, &store.NotificationSubscription{ID: "n-pg", OrgID: "acme",
		Outcomes: []string{"failed"}, Channel: "webhook", Target: hook.URL, Secret: secret, Enabled: true,
		CreatedAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	const runs = 20
	for i := range runs {
		finishRun(t, nodes[0], fmt.Sprintf("run-%02d", i), status.RunFailed, time.Now().Add(-30*time.Second))
	}
	startNotifier(t, nodes[0], notify.Config{Holder: "node-a"})
	startNotifier(t, nodes[1], notify.Config{Holder: "node-b"})
	wait.For(t, 15*time.Second, "every run's notification", func() bool { return len(rc.events()) >= runs })
	// More passes, by a third node too: nothing is queued or sent again.
	third := notify.New(nodes[1], notify.Config{Holder: "node-c"})
	third.Tick(ctx)
	third.Tick(ctx)
	seen := map[string]int{}
	for _, e := range rc.events() {
		for i := range runs {
			if strings.Contains(string(e.body), fmt.Sprintf(`"runId":"run-%02d"`, i)) {
				seen[fmt.Sprint(i)]++
			}
		}
	}
	if len(rc.events()) != runs || len(seen) != runs {
		t.Errorf("received %d messages for %d runs, want each of %d runs once: %v", len(rc.events()), len(seen), runs, seen)
	}
	// The receiver answers before the sender records the attempt: wait for
	// the rows to say delivered, then check each took exactly one attempt.
	var rows []*store.NotificationDelivery
	wait.For(t, 15*time.Second, "every delivery row recorded", func() bool {
		var err error
		if rows, err = nodes[1].ListNotificationDeliveries(ctx, store.NotificationDeliveryFilter{SubscriptionID: "n-pg"}); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Status != notify.DeliveryDelivered {
				return false
			}
		}
		return len(rows) == runs
	})
	for _, r := range rows {
		if r.Attempts != 1 {
			t.Errorf("row %s: %s after %d attempts, want delivered after 1", r.RunID, r.Status, r.Attempts)
		}
	}
}
