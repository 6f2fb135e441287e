// Package tlsconf is kici's TLS plumbing: the orchestrator's serving
// certificate, read from KICI_TLS_CERT_FILE and KICI_TLS_KEY_FILE and
// reloaded without a restart (on SIGHUP and when either file changes, so a
// renewal by certbot, cert-manager or a secret mount takes effect), and
// the client side of agents and kici-admin, which trust the system roots
// plus the PEM certificates of KICI_TLS_CA_FILE (a private CA or a
// self-signed certificate). Go's own SSL_CERT_FILE and SSL_CERT_DIR keep
// working for the system roots.
package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// Environment variables of this package.
const (
	// CertFileVar names the PEM certificate chain the orchestrator serves.
	CertFileVar = "KICI_TLS_CERT_FILE"
	// KeyFileVar names the PEM private key of that certificate.
	KeyFileVar = "KICI_TLS_KEY_FILE"
	// CAFileVar names extra PEM CA certificates a client trusts.
	CAFileVar = "KICI_TLS_CA_FILE"
)

// DefaultWatchInterval is how often Watch looks at the files' contents.
const DefaultWatchInterval = 10 * time.Second

// Reloader holds the serving certificate and swaps it on Reload; its
// GetCertificate goes into tls.Config, so every new handshake uses the
// newest certificate and connections already open keep theirs.
type Reloader struct {
	certFile, keyFile string

	mu    sync.RWMutex
	cert  *tls.Certificate
	stamp string // digest of both files' contents as they were read before the last load
}

// NewReloader loads certFile and keyFile. Errors name the files and what
// to fix (unreadable, not PEM, key does not match the certificate).
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads both files again and, when they form a valid pair, serves
// the new certificate from the next handshake on. On error the previous
// certificate stays in force and the error says why.
func (r *Reloader) Reload() error {
	_, err := r.load()
	return err
}

// load is Reload that also returns the files' stamp as read before the
// load: Watch remembers it after a failed load, so the next tick retries
// exactly when the files changed after that read (a pair caught
// half-written is retried once its second file lands).
func (r *Reloader) load() (stamp string, err error) {
	stamp = r.fileStamp()
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return stamp, fmt.Errorf("TLS certificate %s / key %s: %w (%s and %s must name a PEM certificate chain and its private key)",
			r.certFile, r.keyFile, err, CertFileVar, KeyFileVar)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return stamp, fmt.Errorf("TLS certificate %s: %w", r.certFile, err)
		}
	}
	r.mu.Lock()
	r.cert, r.stamp = &cert, stamp
	r.mu.Unlock()
	return stamp, nil
}

// Leaf returns the certificate being served (parsed).
func (r *Reloader) Leaf() *x509.Certificate {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert.Leaf
}

// GetCertificate is tls.Config.GetCertificate: the current certificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// ServerConfig is the tls.Config of the orchestrator's listener: TLS 1.2 at
// least, HTTP/1.1 only (agents' WebSockets upgrade from HTTP/1.1), the
// certificate from r.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate, NextProtos: []string{"http/1.1"}}
}

// Changed reports whether either file's contents differ from what the last
// load read. Contents, not size and modification time: a renewed
// certificate has the size of the old one, and two writes within one tick
// of the file system's clock share a modification time.
func (r *Reloader) Changed() bool {
	s := r.fileStamp()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return s != r.stamp
}

// Watch reloads whenever Changed, checking every interval
// (DefaultWatchInterval when ≤ 0), until stop is closed; onReload gets the
// result of each reload (nil: the new certificate is served).
func (r *Reloader) Watch(stop <-chan struct{}, interval time.Duration, onReload func(error)) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if r.Changed() {
			stamp, err := r.load()
			if err != nil {
				// Remember the files that failed so a broken pair is not
				// retried every tick; any later change retries.
				r.mu.Lock()
				r.stamp = stamp
				r.mu.Unlock()
			}
			onReload(err)
		}
	}
}

// fileStamp digests both files' contents (a few KiB; read once per
// watch tick), "missing" for a file that cannot be read.
func (r *Reloader) fileStamp() string {
	h := sha256.New()
	for _, f := range []string{r.certFile, r.keyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			b = []byte("missing")
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return string(h.Sum(nil))
}

// ClientConfig returns a client tls.Config trusting the system roots plus
// the PEM certificates in caFile; nil, nil when caFile is "" (Go's
// defaults apply). Errors: unreadable file, no certificate in it.
func ClientConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CAFileVar, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s=%s: no PEM certificate in the file", CAFileVar, caFile)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}

// InstallClientCA makes http.DefaultTransport (and so http.DefaultClient
// and every client built without a transport of its own, the agent's
// WebSocket dialer included) trust caFile's certificates besides the
// system roots. "" changes nothing.
func InstallClientCA(caFile string) error {
	cfg, err := ClientConfig(caFile)
	if err != nil || cfg == nil {
		return err
	}
	tr, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return errors.New("http.DefaultTransport is not an *http.Transport")
	}
	tr.TLSClientConfig = cfg
	return nil
}
