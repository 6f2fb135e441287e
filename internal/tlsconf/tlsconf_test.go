package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate with serial to certFile and
// its key to keyFile.
func selfSigned(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kici"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A reload serves the new pair; a pair that does not match is refused
// with the variables named and the old certificate kept; Changed sees a
// rewrite; a CA file without a certificate is refused.
func TestReloaderKeepsLastGoodPairAndClientCAChecks(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	selfSigned(t, 1, cert, key)
	r, err := NewReloader(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if r.Changed() {
		t.Fatal("Changed right after the load")
	}
	selfSigned(t, 2, cert, key)
	if !r.Changed() {
		t.Fatal("Changed missed a rewrite")
	}
	if err := r.Reload(); err != nil || r.Leaf().SerialNumber.Int64() != 2 {
		t.Fatalf("reload: %v, serial %v", err, r.Leaf().SerialNumber)
	}
	got, _ := r.GetCertificate(nil)
	if got.Leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("GetCertificate serves serial %v", got.Leaf.SerialNumber)
	}
	// A key of another pair: refused, serial 2 still served.
	other := filepath.Join(dir, "other")
	selfSigned(t, 3, other+".c", other+".k")
	if err := os.Rename(other+".k", key); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), KeyFileVar) {
		t.Fatalf("mismatched pair: %v, want an error naming %s", err, KeyFileVar)
	}
	if r.Leaf().SerialNumber.Int64() != 2 {
		t.Fatalf("after a failed reload serial %v is served, want 2", r.Leaf().SerialNumber)
	}
	if _, err := NewReloader(cert, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing key file was accepted")
	}

	if cfg, err := ClientConfig(""); cfg != nil || err != nil {
		t.Fatalf("no CA file: %v %v", cfg, err)
	}
	if cfg, err := ClientConfig(cert); err != nil || cfg.RootCAs == nil {
		t.Fatalf("CA file: %v", err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	_ = os.WriteFile(notPEM, []byte("hello"), 0o600)
	if _, err := ClientConfig(notPEM); err == nil || !strings.Contains(err.Error(), CAFileVar) {
		t.Fatalf("non-PEM CA file: %v", err)
	}
}

// A renewal that leaves both files with their old sizes and modification
// times (a renewed certificate has the old one's size; two writes within
// one tick of the file system's clock share a time) is still seen.
func TestChangedSeesARenewalOfTheSameSizeAndTime(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	selfSigned(t, 10, cert, key)
	r, err := NewReloader(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	size := func(f string) int64 {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	oldCert, oldKey := size(cert), size(key)
	old := time.Now().Add(-time.Minute).Truncate(time.Second)
	// ECDSA signatures vary in length by a byte or two: renew until the
	// new pair has the old sizes.
	for i := 0; ; i++ {
		if err := os.Chtimes(cert, old, old); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(key, old, old); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := r.Reload(); err != nil {
				t.Fatal(err)
			}
		}
		selfSigned(t, 11, cert, key)
		if size(cert) == oldCert && size(key) == oldKey {
			break
		}
		if i == 50 {
			t.Fatal("no renewal of the same size in 50 tries")
		}
	}
	for _, f := range []string{cert, key} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if !r.Changed() {
		t.Fatal("a renewal with the old sizes and modification times went unseen")
	}
}

// Watch retries a pair it caught half-written once the second file lands.
func TestWatchRetriesAHalfWrittenPair(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	selfSigned(t, 20, cert, key)
	r, err := NewReloader(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 16)
	stop := make(chan struct{})
	defer close(stop)
	go r.Watch(stop, 5*time.Millisecond, func(err error) { results <- err })
	// The certificate of the next pair arrives first.
	next := filepath.Join(dir, "next")
	selfSigned(t, 21, next+".c", next+".k")
	if err := os.Rename(next+".c", cert); err != nil {
		t.Fatal(err)
	}
	if err := <-results; err == nil {
		t.Fatal("a certificate without its key loaded")
	}
	if err := os.Rename(next+".k", key); err != nil {
		t.Fatal(err)
	}
	if err := <-results; err != nil {
		t.Fatalf("the completed pair: %v", err)
	}
	if got := r.Leaf().SerialNumber.Int64(); got != 21 {
		t.Fatalf("serving serial %d, want 21", got)
	}
}
