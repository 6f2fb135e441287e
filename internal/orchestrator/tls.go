package orchestrator

import (
	"crypto/tls"
	"net"
	"time"

	"kici.dev/kici/internal/tlsconf"
)

// tlsWatchInterval is how often the certificate files are looked at.
var tlsWatchInterval = tlsconf.DefaultWatchInterval

// serveTLS wraps ln in TLS when KICI_TLS_CERT_FILE and KICI_TLS_KEY_FILE
// are set (ln unchanged otherwise): the certificate is loaded now (a bad
// pair stops the start with the reason) and reloaded on SIGHUP
// (reloadOnSIGHUP) and whenever either file changes, until shutdown.
func (s *Server) serveTLS(ln net.Listener) (net.Listener, error) {
	if !s.cfg.TLS() {
		return ln, nil
	}
	r, err := tlsconf.NewReloader(s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	s.tls = r
	s.logCertificate("TLS certificate loaded")
	stop := make(chan struct{})
	go r.Watch(stop, tlsWatchInterval, func(err error) { s.afterTLSReload("file change", err) })
	s.cleanup.pushFunc("TLS certificate watch", func() { close(stop) })
	return tls.NewListener(ln, r.ServerConfig()), nil
}

// reloadTLS reads the certificate files again (SIGHUP); without TLS it
// does nothing.
func (s *Server) reloadTLS() {
	if s.tls != nil {
		s.afterTLSReload("SIGHUP", s.tls.Reload())
	}
}

func (s *Server) afterTLSReload(why string, err error) {
	if err != nil {
		s.log.Error("TLS certificate reload failed; the previous certificate is still served", "trigger", why, "err", err)
		return
	}
	s.logCertificate("TLS certificate reloaded")
}

func (s *Server) logCertificate(msg string) {
	leaf := s.tls.Leaf()
	s.log.Info(msg, "subject", leaf.Subject.String(), "dnsNames", leaf.DNSNames, "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339))
}
