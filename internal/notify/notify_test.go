package notify_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

const secret = "s3cret-signing-key-0123"

// finishRun stores a run of workflow ci on branch main that ended with st.
func finishRun(t *testing.T, s store.Store, id string, st status.Run, created time.Time) {
	t.Helper()
	done := created.Add(time.Second)
	run := &store.Run{ID: id, WorkflowName: "ci", Status: st, Provider: "local", RepoIdentifier: "acme/app", Ref: "refs/heads/main",
		TargetBranch: "main", SHA: "abc123", SourceID: "src-1", OrgID: "acme", CreatedAt: created, CompletedAt: &done}
	if err := s.CreateRun(context.Background(), run, []*store.Job{{ID: id + "-j", JobName: "build", BaseJobName: "build",
		Status: status.Job(st), CreatedAt: created}}); err != nil {
		t.Fatal(err)
	}
}

func deliveries(t *testing.T, s store.Store, sub string) []*store.NotificationDelivery {
	rows, err := s.ListNotificationDeliveries(context.Background(), store.NotificationDeliveryFilter{SubscriptionID: sub})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

type received struct {
	event, delivery string
	body            []byte
}

// receiver is a loopback webhook endpoint that verifies every request's
// signature and, while cut is set, drops the connection after reading
// the request, as a receiver killed mid-delivery does.
type receiver struct {
	mu  sync.Mutex
	got []received
	bad int
	cut bool
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.cut {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), r.Header.Get(notify.TimestampHeader), body, time.Now(), 0); err != nil {
		rc.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	rc.got = append(rc.got, received{event: r.Header.Get(notify.EventHeader), delivery: r.Header.Get(notify.DeliveryHeader), body: body})
}

func (rc *receiver) events() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func startNotifier(t *testing.T, s store.Store, cfg notify.Config) {
	t.Helper()
	cfg.Poll, cfg.Backoff = 20*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); notify.New(s, cfg).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestNotifyWebhookSignedRetriedAfterReceiverDies: a failed run reaches a
// signed webhook; the first receiver dies mid-delivery, the outbox row
// waits with its error and is delivered, signed, to the receiver that
// comes back on the same address; "fixed" follows a success after the
// failure, and an unsubscribed outcome (succeeded) is not sent.
func TestNotifyWebhookSignedRetriedAfterReceiverDies(t *testing.T) {
	s := teststore.SQLite(t)
	ctx := context.Background()
	rc := &receiver{cut: true}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	first := &http.Server{Handler: rc}
	go func() { _ = first.Serve(l) }() // it ends when the test closes it; that error says only so

	sub := &store.NotificationSubscription{ID: "n-hook", OrgID: "acme", Outcomes: []string{"failed", "fixed"}, Channel: "webhook",
		Target: "http://" + addr + "/hook", Secret: secret, Enabled: true, CreatedAt: time.Now().Add(-time.Minute)}
	if err := notify.Validate(sub); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateNotificationSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	finishRun(t, s, "run-1", status.RunFailed, time.Now().Add(-30*time.Second))
	startNotifier(t, s, notify.Config{PublicURL: "https://ci.example"})

	wait.For(t, 15*time.Second, "a failed first attempt", func() bool {
		rows := deliveries(t, s, "n-hook")
		return len(rows) == 1 && rows[0].Attempts >= 1 && rows[0].LastError != ""
	})
	if rows := deliveries(t, s, "n-hook"); rows[0].Status != notify.DeliveryPending || rows[0].NextAttemptAt == nil {
		t.Fatalf("after the receiver died the row is %+v, want pending with a retry time", rows[0])
	}
	first.Close()
	rc.mu.Lock()
	rc.cut = false
	rc.mu.Unlock()
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	second := &http.Server{Handler: rc}
	go func() { _ = second.Serve(l2) }() // it ends when the test closes it; that error says only so
	t.Cleanup(func() { second.Close() })

	wait.For(t, 15*time.Second, "the retried delivery", func() bool { return len(rc.events()) == 1 })
	ev := rc.events()[0]
	if ev.event != "run.failed" || !strings.Contains(string(ev.body), `"runId":"run-1"`) ||
		!strings.Contains(string(ev.body), `"url":"https://ci.example/ui/runs/run-1"`) {
		t.Errorf("delivered %s %s", ev.event, ev.body)
	}
	rows := deliveries(t, s, "n-hook")
	if rows[0].Status != notify.DeliveryDelivered || rows[0].Attempts < 2 || ev.delivery != rows[0].ID {
		t.Errorf("row after the retry: %+v (header delivery %s)", rows[0], ev.delivery)
	}

	finishRun(t, s, "run-2", status.RunSuccess, time.Now().Add(-10*time.Second))
	wait.For(t, 15*time.Second, "the fixed notification", func() bool { return len(rc.events()) == 2 })
	if ev := rc.events()[1]; ev.event != "run.fixed" || !strings.Contains(string(ev.body), `"runId":"run-2"`) {
		t.Errorf("second delivery %s %s", ev.event, ev.body)
	}
	finishRun(t, s, "run-3", status.RunSuccess, time.Now().Add(-5*time.Second))
	finishRun(t, s, "run-4", status.RunFailed, time.Now().Add(-4*time.Second))
	wait.For(t, 15*time.Second, "the next failure", func() bool { return len(rc.events()) == 3 })
	if ev := rc.events()[2]; ev.event != "run.failed" || !strings.Contains(string(ev.body), `"runId":"run-4"`) {
		t.Errorf("third delivery %s %s (a success after a success is not fixed)", ev.event, ev.body)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.bad != 0 {
		t.Errorf("%d requests failed signature verification", rc.bad)
	}
}

// TestNotifyVerifyRefusesTamperingAndReplay: a changed body, another key
// or an old timestamp fail verification.
func TestNotifyVerifyRefusesTamperingAndReplay(t *testing.T) {
	now := time.Now()
	body := []byte(`{"event":"run.failed"}`)
	sig := notify.Sign(secret, now, body)
	ts := now.Unix()
	tsStr := func(u int64) string { return strconv.FormatInt(u, 10) }
	if err := notify.Verify(secret, sig, tsStr(ts), body, now, 0); err != nil {
		t.Fatalf("valid: %v", err)
	}
	if err := notify.Verify(secret, sig, tsStr(ts), []byte(`{"event":"run.succeeded"}`), now, 0); err != notify.ErrBadSignature {
		t.Errorf("tampered body: %v", err)
	}
	if err := notify.Verify("another-key-0123456", sig, tsStr(ts), body, now, 0); err != notify.ErrBadSignature {
		t.Errorf("other key: %v", err)
	}
	if err := notify.Verify(secret, sig, tsStr(ts), body, now.Add(10*time.Minute), 0); err != notify.ErrStale {
		t.Errorf("replayed after 10 minutes: %v", err)
	}
}

// smtpBackend is a real SMTP server's backend: PLAIN auth with one user,
// messages kept.
type smtpBackend struct {
	mu   sync.Mutex
	msgs []string
	to   [][]string
	tls  []bool
}

type smtpSession struct {
	b      *smtpBackend
	c      *smtp.Conn
	authed bool
	to     []string
}

func (b *smtpBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &smtpSession{b: b, c: c}, nil
}
func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "kici" || pass != "mail-pass" {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}
func (s *smtpSession) Mail(string, *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	return nil
}
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error { s.to = append(s.to, to); return nil }
func (s *smtpSession) Data(r io.Reader) error {
	b, _ := io.ReadAll(r)
	_, isTLS := s.c.TLSConnectionState()
	s.b.mu.Lock()
	s.b.msgs, s.b.to, s.b.tls = append(s.b.msgs, string(b)), append(s.b.to, s.to), append(s.b.tls, isTLS)
	s.b.mu.Unlock()
	return nil
}
func (s *smtpSession) Reset()        { s.to = nil }
func (s *smtpSession) Logout() error { return nil }

// TestNotifyEmailOverSTARTTLSWithAuth: a failed run is mailed through a
// real SMTP server that offers STARTTLS and accepts PLAIN auth only over
// TLS; a Slack-compatible webhook gets the text of the same outcome.
func TestNotifyEmailOverSTARTTLSWithAuth(t *testing.T) {
	certSrv := httptest.NewTLSServer(http.NotFoundHandler()) // its loopback certificate and the pool that trusts it
	defer certSrv.Close()
	roots := certSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	be := &smtpBackend{}
	srv := smtp.NewServer(be)
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: certSrv.TLS.Certificates}
	srv.AllowInsecureAuth = false
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }() // it ends when the test closes it; that error says only so
	defer srv.Close()

	var slackMu sync.Mutex
	var slackText []string
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		slackMu.Lock()
		slackText = append(slackText, string(b))
		slackMu.Unlock()
	}))
	defer slack.Close()

	s := teststore.SQLite(t)
	ctx := context.Background()
	for _, sub := range []*store.NotificationSubscription{
		{ID: "n-mail", OrgID: "acme", WorkflowName: "ci", Outcomes: []string{"failed"}, Channel: "email", Target: "Dev <dev@acme.test>, ops@acme.test"},
		{ID: "n-slack", OrgID: "acme", SourceID: "src-1", Outcomes: []string{"failed"}, Channel: "slack", Target: slack.URL + "/services/T/B/X"},
		{ID: "n-other", OrgID: "acme", WorkflowName: "deploy", Outcomes: []string{"failed"}, Channel: "slack", Target: slack.URL + "/other"},
	} {
		sub.Enabled, sub.CreatedAt = true, time.Now().Add(-time.Minute)
		if err := notify.Validate(sub); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateNotificationSubscription(ctx, sub); err != nil {
			t.Fatal(err)
		}
	}
	finishRun(t, s, "run-9", status.RunFailed, time.Now().Add(-10*time.Second))
	startNotifier(t, s, notify.Config{SMTP: notify.SMTPConfig{Addr: l.Addr().String(), From: "kici@acme.test", Username: "kici",
		Password: "mail-pass", TLS: &tls.Config{RootCAs: roots}}})

	wait.For(t, 15*time.Second, "the mail", func() bool { be.mu.Lock(); defer be.mu.Unlock(); return len(be.msgs) == 1 })
	be.mu.Lock()
	msg, to, overTLS := be.msgs[0], be.to[0], be.tls[0]
	be.mu.Unlock()
	if !overTLS || strings.Join(to, ",") != "dev@acme.test,ops@acme.test" || !strings.Contains(msg, "Subject: kici: ci of acme/app (main) failed") ||
		!strings.Contains(msg, "run run-9") {
		t.Errorf("mail (tls=%v, to=%v):\n%s", overTLS, to, msg)
	}
	wait.For(t, 15*time.Second, "the slack message", func() bool {
		return len(deliveries(t, s, "n-slack")) == 1 && deliveries(t, s, "n-slack")[0].Status == notify.DeliveryDelivered
	})
	slackMu.Lock()
	if len(slackText) != 1 || !strings.Contains(slackText[0], `"text":"kici: ci of acme/app (main) failed`) {
		t.Errorf("slack bodies %q", slackText)
	}
	slackMu.Unlock()
	if rows := deliveries(t, s, "n-other"); len(rows) != 0 {
		t.Errorf("a subscription of another workflow was told: %+v", rows)
	}
	if rows := deliveries(t, s, "n-mail"); rows[0].Status != notify.DeliveryDelivered {
		t.Errorf("mail row %+v", rows[0])
	}
}

// TestNotifyValidateRefusesBadSubscriptions: a short webhook secret, a
// non-http URL, an unknown outcome or channel, a bad address list and a
// missing org are refused.
func TestNotifyValidateRefusesBadSubscriptions(t *testing.T) {
	for _, n := range []store.NotificationSubscription{
		{OrgID: "o", Outcomes: []string{"failed"}, Channel: "webhook", Target: "http://x/h", Secret: "short"},
		{OrgID: "o", Outcomes: []string{"failed"}, Channel: "webhook", Target: "ftp://x/h", Secret: secret},
		{OrgID: "o", Outcomes: []string{"exploded"}, Channel: "slack", Target: "https://x/h"},
		{OrgID: "o", Outcomes: []string{"failed"}, Channel: "email", Target: "not an address"},
		{OrgID: "o", Outcomes: []string{"failed"}, Channel: "pager", Target: "https://x"},
		{Outcomes: []string{"failed"}, Channel: "slack", Target: "https://x/h"},
	} {
		if err := notify.Validate(&n); err == nil {
			t.Errorf("accepted %+v", n)
		}
	}
}

// TestNotifyHeldRunOnceAndTestMessage: a run held for approval is
// announced once however many passes see it, and a test message goes
// through the same outbox.
func TestNotifyHeldRunOnceAndTestMessage(t *testing.T) {
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	s := teststore.SQLite(t)
	ctx := context.Background()
	sub := &store.NotificationSubscription{ID: "n-held", OrgID: "acme", Outcomes: []string{"held"}, Channel: "webhook",
		Target: hook.URL, Secret: secret, Enabled: true, CreatedAt: time.Now().Add(-time.Minute)}
	if err := s.CreateNotificationSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	run := &store.Run{ID: "run-held", WorkflowName: "deploy", Status: status.RunHeld, Provider: "local", OrgID: "acme", SourceID: "src-1",
		CreatedAt: time.Now()}
	if err := s.CreateRun(ctx, run, []*store.Job{{ID: "jh", JobName: "d", BaseJobName: "d", Status: status.JobPending, CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	n := notify.New(s, notify.Config{})
	for range 3 {
		n.Tick(ctx)
	}
	if got := rc.events(); len(got) != 1 || got[0].event != "run.held" {
		t.Fatalf("held announcements: %+v", got)
	}
	if _, err := s.EnqueueNotification(ctx, notify.TestDelivery(sub, "", time.Now())); err != nil {
		t.Fatal(err)
	}
	n.Tick(ctx)
	if got := rc.events(); len(got) != 2 || got[1].event != "run.test" {
		t.Fatalf("after the test message: %+v", got)
	}
}
