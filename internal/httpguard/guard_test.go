package httpguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// slowClient opens a connection from localIP, sends complete headers for
// a POST with a Content-Length of size and one byte of body, and returns
// the connection (the rest of the body never comes).
func slowClient(t *testing.T, addr, localIP, path string, size int) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(localIP)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, size)
	return c
}

// closedWithin reads c until the server closes it and reports whether it
// did so before d; the status line of any response is returned.
func closedWithin(c net.Conn, d time.Duration) (bool, string) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, strings.TrimSpace(status)
	}
	return true, strings.TrimSpace(status) // EOF or reset: the server closed it
}

// readingServer serves every request by reading its whole body; inFlight
// is the number of handlers running, peak its maximum.
func readingServer(t *testing.T, g *Guard, unauth func(*http.Request) bool) (srv *httptest.Server, peak *atomic.Int64) {
	t.Helper()
	var inFlight atomic.Int64
	peak = &atomic.Int64{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "read %d bytes", len(b))
	})
	srv = httptest.NewUnstartedServer(g.Handler(h, unauth))
	srv.Config.ReadHeaderTimeout = 10 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, peak
}

// TestTricklingBodiesAreCut: many connections with complete headers and a
// 1-byte body are all closed soon after the grace; at most the caps' worth
// of them ever reach a handler (bounding what the server holds); a client
// at another address is served throughout, and a steady upload slower
// than the grace but above the minimum rate is not cut.
func TestTricklingBodiesAreCut(t *testing.T) {
	const attackers = 600
	// Every trickling connection is closed well before this on an idle
	// machine (the read returns at the close); the window is wide so a
	// starved test process still sees them all closed.
	const closeWindow = 15 * time.Second
	// 1 byte of body buys an attacker 1/16384 s past the grace; the steady
	// upload below sends ~89 KiB/s, over 5 times the minimum rate, so a
	// paused process does not get it cut.
	g := New(Config{BodyGrace: 500 * time.Millisecond, MinBodyRate: 16 << 10, MaxUnauthenticated: 100, MaxUnauthenticatedPerClient: 40})
	srv, peak := readingServer(t, g, func(*http.Request) bool { return true })
	addr := srv.Listener.Addr().String()

	start := time.Now()
	conns := make([]net.Conn, attackers)
	for i := range conns {
		conns[i] = slowClient(t, addr, "127.0.0.1", "/webhook/acme/generic/app", 1<<20)
	}

	// A legitimate client elsewhere is served while the attack holds.
	legit := http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	resp, err := legit.Post(srv.URL+"/webhook/acme/generic/app", "application/json", strings.NewReader(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "read 11 bytes" {
		t.Fatalf("legitimate request during the attack: %d %q", resp.StatusCode, b)
	}

	var wg sync.WaitGroup
	var open, refused atomic.Int64
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			closed, status := closedWithin(c, closeWindow)
			if !closed {
				open.Add(1)
			}
			if strings.Contains(status, "503") {
				refused.Add(1)
			}
		}(c)
	}
	wg.Wait()
	took := time.Since(start)
	if n := open.Load(); n > 0 {
		t.Fatalf("%d of %d trickling connections still open after %s", n, attackers, closeWindow)
	}
	if p := peak.Load(); p > 41 {
		t.Fatalf("%d handlers held bodies at once, want at most 40 (the per-client cap) + the legitimate one", p)
	}
	if got := g.Refused() + g.Cut(); got != attackers || refused.Load() != g.Refused() {
		t.Fatalf("refused %d (answered 503: %d) + cut %d = %d, want every one of the %d", g.Refused(), refused.Load(), g.Cut(), got, attackers)
	}
	t.Logf("%d trickling connections all closed in %v; %d refused at the cap, %d cut at the deadline, at most %d in handlers",
		attackers, took.Round(time.Millisecond), g.Refused(), g.Cut(), peak.Load())

	// A slow but steady upload: 1.5 s for 128 KiB is past the grace and
	// above 16 KiB/s on average, so it completes.
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 8<<10)
		for range 16 {
			wait.Elapse(t.Context(), 90*time.Millisecond) // a slow client paces its bytes
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", srv.URL+"/x", pr)
	req.ContentLength = 128 << 10
	resp, err = legit.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "read 131072 bytes" {
		t.Fatalf("steady slow upload: %d %q", resp.StatusCode, b)
	}
}

// TestUnreadBodyClosesConnection: a handler that answers without reading
// the body (a 404, a 401) does not leave the connection waiting for the
// rest of a trickling body; authenticated-path requests do not take cap
// slots.
func TestUnreadBodyClosesConnection(t *testing.T) {
	g := New(Config{BodyGrace: time.Minute, MaxUnauthenticated: 1, MaxUnauthenticatedPerClient: 1})
	srv := httptest.NewServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found", http.StatusNotFound)
	}), func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/webhook/") }))
	defer srv.Close()
	for i := range 20 {
		c := slowClient(t, srv.Listener.Addr().String(), "127.0.0.1", "/api/v1/admin/x", 100<<10)
		closed, status := closedWithin(c, 2*time.Second)
		if !closed || !strings.Contains(status, "404") {
			t.Fatalf("request %d: closed=%v status %q, want a 404 and the connection closed", i, closed, status)
		}
	}
	if g.Refused() != 0 {
		t.Fatalf("requests outside the unauthenticated paths were refused: %d", g.Refused())
	}
}

// TestBurstWaitsForSlots: a burst of quick legitimate requests from one
// address, larger than the per-client cap, is served in turn, not refused.
func TestBurstWaitsForSlots(t *testing.T) {
	g := New(Config{BodyGrace: 2 * time.Second, MaxUnauthenticated: 8, MaxUnauthenticatedPerClient: 4})
	srv, peak := readingServer(t, g, func(*http.Request) bool { return true })
	var wg sync.WaitGroup
	codes := make([]int, 100)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL+"/webhook/a/generic/b", "application/json", strings.NewReader(`{}`))
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body) // only the status is compared
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Fatalf("request %d of the burst: %d, want 200", i, c)
		}
	}
	if p := peak.Load(); p > 4 {
		t.Fatalf("%d handlers at once from one address, cap 4", p)
	}
}
