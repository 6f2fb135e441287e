package config

import (
	"fmt"
	"net"
	"net/mail"
	"strings"
)

// Notify holds the mail relay of email notifications (package notify).
type Notify struct {
	// SMTPAddr is KICI_SMTP_ADDR, host:port ("" = email notifications
	// are recorded as failed, saying the relay is missing).
	SMTPAddr string
	// SMTPFrom is KICI_SMTP_FROM, the sender address.
	SMTPFrom string
	// SMTPUsername and SMTPPassword are KICI_SMTP_USERNAME and
	// KICI_SMTP_PASSWORD (SASL PLAIN; empty username = no AUTH).
	SMTPUsername, SMTPPassword string
	// SMTPStartTLS is KICI_SMTP_STARTTLS: "required" (default) or "off".
	SMTPStartTLS string
}

// LoadNotify reads the notification variables from environ ("KEY=value"
// form). Errors name the variable and what is accepted.
func LoadNotify(environ []string) (*Notify, error) {
	n := &Notify{SMTPStartTLS: "required"}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "KICI_SMTP_ADDR":
			if v = strings.TrimSpace(v); v != "" {
				if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
					return nil, fmt.Errorf("KICI_SMTP_ADDR=%q: must be host:port, e.g. smtp.example.com:587", v)
				}
			}
			n.SMTPAddr = v
		case "KICI_SMTP_FROM":
			if v = strings.TrimSpace(v); v != "" {
				if _, err := mail.ParseAddress(v); err != nil {
					return nil, fmt.Errorf("KICI_SMTP_FROM=%q: must be an email address, e.g. kici@example.com", v)
				}
			}
			n.SMTPFrom = v
		case "KICI_SMTP_USERNAME":
			n.SMTPUsername = v
		case "KICI_SMTP_PASSWORD":
			n.SMTPPassword = v
		case "KICI_SMTP_STARTTLS":
			switch v = strings.TrimSpace(v); v {
			case "", "required":
				n.SMTPStartTLS = "required"
			case "off":
				n.SMTPStartTLS = "off"
			default:
				return nil, fmt.Errorf("KICI_SMTP_STARTTLS=%q: must be required or off", v)
			}
		}
	}
	if n.SMTPAddr != "" && n.SMTPFrom == "" {
		return nil, fmt.Errorf("KICI_SMTP_ADDR is set without KICI_SMTP_FROM: set the sender address, e.g. KICI_SMTP_FROM=kici@example.com")
	}
	return n, nil
}
