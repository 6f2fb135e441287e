package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/mail"
	neturl "net/url"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"kici.dev/kici/internal/store"
)

// SMTPConfig is the orchestrator's mail relay (KICI_SMTP_*).
type SMTPConfig struct {
	// Addr is host:port ("" = email subscriptions cannot be delivered).
	Addr string
	// From is the envelope and header sender.
	From string
	// Username and Password authenticate with SASL PLAIN (only after
	// STARTTLS, unless the relay is on loopback).
	Username, Password string
	// StartTLS: "required" (the default: a relay that does not offer
	// STARTTLS is an error, never a silent downgrade) or "off" (a relay
	// on loopback or a trusted network).
	StartTLS string
	// TLS configures STARTTLS (nil = system roots, ServerName from Addr).
	TLS *tls.Config
}

// sendError is a failed attempt: the status (HTTP, or SMTP reply code; 0
// = none) and whether it is worth retrying.
type sendError struct {
	status    int
	permanent bool
	err       error
}

func (e *sendError) Error() string { return e.err.Error() }

func temporary(status int, err error) error { return &sendError{status: status, err: err} }
func permanent(status int, err error) error {
	return &sendError{status: status, permanent: true, err: err}
}

// sender delivers rendered messages.
type sender struct {
	http *http.Client
	smtp SMTPConfig
	now  func() time.Time
}

func (s *sender) send(ctx context.Context, sub *store.NotificationSubscription, d *store.NotificationDelivery) error {
	m, err := decodeMessage(d.Payload)
	if err != nil {
		return permanent(0, fmt.Errorf("stored message: %w", err))
	}
	switch Channel(sub.Channel) {
	case ChannelWebhook:
		h := http.Header{}
		ts := s.now()
		h.Set(TimestampHeader, fmt.Sprint(ts.Unix()))
		h.Set(SignatureHeader, Sign(sub.Secret, ts, d.Payload))
		h.Set(DeliveryHeader, d.ID)
		h.Set(EventHeader, m.Event)
		return s.post(ctx, sub.Target, h, d.Payload)
	case ChannelSlack:
		body, _ := json.Marshal(map[string]string{"text": m.Text()})
		return s.post(ctx, sub.Target, http.Header{}, body)
	case ChannelEmail:
		return s.mail(ctx, sub.Target, m)
	}
	return permanent(0, fmt.Errorf("unknown channel %q", sub.Channel))
}

func (s *sender) post(ctx context.Context, url string, h http.Header, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return permanent(0, err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kici-notify")
	resp, err := s.http.Do(req)
	if err != nil {
		// Not the *url.Error's text: a Slack URL's path is its credential.
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return temporary(0, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return temporary(resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(snippet))))
	default:
		return permanent(resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(snippet))))
	}
}

func (s *sender) mail(ctx context.Context, to string, m Message) error {
	cfg := s.smtp
	if cfg.Addr == "" || cfg.From == "" {
		return permanent(0, errors.New("no SMTP relay configured (set KICI_SMTP_ADDR and KICI_SMTP_FROM)"))
	}
	rcpts, err := mail.ParseAddressList(to)
	if err != nil {
		return permanent(0, err)
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return permanent(0, fmt.Errorf("KICI_SMTP_ADDR: %w", err))
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return temporary(0, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var c *smtp.Client
	if cfg.StartTLS == "off" {
		c = smtp.NewClient(conn)
	} else {
		tc := cfg.TLS
		if tc == nil {
			tc = &tls.Config{}
		}
		tc = tc.Clone()
		if tc.ServerName == "" {
			tc.ServerName = host
		}
		if c, err = smtp.NewClientStartTLS(conn, tc); err != nil {
			_ = conn.Close()
			return temporary(0, fmt.Errorf("STARTTLS with %s: %w", cfg.Addr, err))
		}
	}
	defer c.Close()
	if cfg.Username != "" {
		if err := c.Auth(sasl.NewPlainClient("", cfg.Username, cfg.Password)); err != nil {
			return smtpErr(err)
		}
	}
	var addrs []string
	for _, r := range rcpts {
		addrs = append(addrs, r.Address)
	}
	var msg bytes.Buffer
	fmt.Fprintf(&msg, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		cfg.From, strings.Join(addrs, ", "), mime.QEncoding.Encode("utf-8", m.Summary()), s.now().Format(time.RFC1123Z))
	msg.WriteString(strings.ReplaceAll(m.Text(), "\n", "\r\n") + "\r\n")
	if err := c.SendMail(cfg.From, addrs, &msg); err != nil {
		return smtpErr(err)
	}
	return c.Quit()
}

// smtpErr classifies an SMTP error: a 5xx reply is permanent, 4xx and
// connection errors are retried.
func smtpErr(err error) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		if se.Code >= 500 {
			return permanent(se.Code, err)
		}
		return temporary(se.Code, err)
	}
	return temporary(0, err)
}
