package orchestrator

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/store"
)

// setupNotifier builds the notifier: outcomes of runs to the org's
// notification subscriptions, sent with hc (the guarded client of source
// URLs, so a webhook target obeys the same local-address rule) and the
// KICI_SMTP_* relay, trusting KICI_TLS_CA_FILE besides the system roots.
func setupNotifier(cfg *config.Config, st store.Store, hc *http.Client, nodeID string, logger *slog.Logger) (*notify.Notifier, error) {
	nc, err := config.LoadNotify(os.Environ())
	if err != nil {
		return nil, err
	}
	fc, err := config.LoadForgeStatus(os.Environ())
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if cfg.TLSCAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("KICI_TLS_CA_FILE=%s: no PEM certificate could be read for the SMTP relay", cfg.TLSCAFile)
		}
		tc = &tls.Config{RootCAs: pool}
	}
	return notify.New(st, notify.Config{PublicURL: fc.PublicURL, HTTP: hc, Holder: nodeID, Logger: logger,
		SMTP: notify.SMTPConfig{Addr: nc.SMTPAddr, From: nc.SMTPFrom, Username: nc.SMTPUsername, Password: nc.SMTPPassword,
			StartTLS: nc.SMTPStartTLS, TLS: tc}}), nil
}
