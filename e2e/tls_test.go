package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// testCA is a throwaway certificate authority that signs serving
// certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kici test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate for 127.0.0.1 with the given serial, followed
// by the CA's certificate (a chain, as an ACME client writes it), and its
// key to certFile and keyFile.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kici"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem...)
	// Key first, then certificate: a reload between the two writes sees a
	// mismatched pair, which must be refused with the old one kept.
	if err := os.WriteFile(keyFile+".tmp", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile+".tmp", chain, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(keyFile+".tmp", keyFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(certFile+".tmp", certFile); err != nil {
		t.Fatal(err)
	}
}

// servedSerial is the serial of the certificate url's server presents,
// verified against pool; 0 and the error when the handshake fails.
func servedSerial(url string, pool *x509.CertPool) (int64, error) {
	host := strings.TrimPrefix(url, "https://")
	conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// With KICI_TLS_CERT_FILE and KICI_TLS_KEY_FILE the orchestrator serves
// HTTPS only: its healthcheck probe and kici-admin with KICI_TLS_CA_FILE
// talk to it, a spawned
// agent dials wss:// and runs a workflow, plain HTTP gets no answer; a
// renewed certificate is served after SIGHUP and, without a signal, after
// the files change.
func TestTLSServeAgentsAdminAndReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.pem")
	ca := newTestCA(t)
	ca.issue(t, 101, certFile, keyFile)
	if err := os.WriteFile(caFile, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)

	repo, _ := makeRepo(t)
	o := startOrchestrator(t, "KICI_TLS_CERT_FILE="+certFile, "KICI_TLS_KEY_FILE="+keyFile)
	if !strings.HasPrefix(o.url, "https://") {
		t.Fatalf("orchestrator.json url %q, want https://", o.url)
	}
	if serial, err := servedSerial(o.url, pool); err != nil || serial != 101 {
		t.Fatalf("served certificate serial %d, err %v; want 101", serial, err)
	}
	// Plain HTTP on the TLS port gets no API answer.
	if resp, err := http.Get("http://" + strings.TrimPrefix(o.url, "https://") + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered 200 on the TLS listener")
		}
	}
	// The container/unit health probe speaks TLS to a TLS node.
	probe := exec.Command(filepath.Join(binDir, "kici-orchestrator"), "healthcheck")
	probe.Env = append(cleanEnv(), append(o.env, "KICI_PORT=0")...)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Errorf("kici-orchestrator healthcheck on a TLS node: %v %s", err, out)
	}
	// kici-admin: refused without the CA, works with KICI_TLS_CA_FILE.
	noCA := exec.Command(filepath.Join(binDir, "kici-admin"), "source", "list")
	noCA.Env = append(cleanEnv(), o.env...)
	if out, err := noCA.CombinedOutput(); err == nil || !strings.Contains(string(out), "certificate") {
		t.Errorf("kici-admin without KICI_TLS_CA_FILE: err %v, output %s; want a certificate error", err, out)
	}
	o.env = append(o.env, "KICI_TLS_CA_FILE="+caFile)
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "fixture", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	var first string
	finished := func() bool {
		req, _ := http.NewRequest("GET", o.url+"/api/v1/admin/runs?deliveryId="+delivery, nil)
		req.Header.Set("Authorization", "Bearer "+o.token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Runs []runView `json:"runs"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list.Runs) == 1 && (list.Runs[0].Status == "success" || list.Runs[0].Status == "failed") {
			first = list.Runs[0].RunID
		}
		return first != ""
	}
	wait.For(t, 4*time.Minute, "the run over wss:// to finish", finished)
	// The spawned agents reached the node over wss://: the job "first" ran
	// its greeting step.
	if out := o.admin(t, "runs", "summary", first); !strings.Contains(out, "first") || !strings.Contains(out, "success") {
		t.Errorf("runs summary of a run over wss://:\n%s", out)
	}

	// SIGHUP: the renewed certificate is served from the next connection.
	ca.issue(t, 202, certFile, keyFile)
	if err := o.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitServed(t, o.url, pool, 202, 10*time.Second)
	// A change of the files alone (no signal) is picked up by the watch.
	ca.issue(t, 303, certFile, keyFile)
	waitServed(t, o.url, pool, 303, 30*time.Second)
	// A broken pair is refused and the last good certificate stays.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := o.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, o, "TLS certificate reload failed")
	if serial, err := servedSerial(o.url, pool); err != nil || serial != 303 {
		t.Errorf("after a broken key: serial %d, err %v; want 303 still served", serial, err)
	}
}

func waitServed(t *testing.T, url string, pool *x509.CertPool, want int64, timeout time.Duration) {
	t.Helper()
	var got int64
	var err error
	if wait.Until(timeout, func() bool { got, err = servedSerial(url, pool); return err == nil && got == want }) {
		return
	}
	t.Fatalf("served certificate serial %d (err %v), want %d within %s", got, err, want, timeout)
}
