package healthcheck

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

func TestProbeStatuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			if _, err := w.Write([]byte(`{"status":"ok"}`)); err != nil {
				t.Error(err)
			}
		case "/ready":
			w.WriteHeader(http.StatusServiceUnavailable)
			if _, err := w.Write([]byte(`{"status":"not_ready","error":"Not ready: database down"}`)); err != nil {
				t.Error(err)
			}
		case "/slow":
			wait.Elapse(r.Context(), 500*time.Millisecond) // a server slower than the probe's timeout
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := Probe(ctx, srv.URL, "/health"); err != nil {
		t.Fatalf("healthy server: %v", err)
	}
	if err := Probe(ctx, srv.URL, "/ready"); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "database down") {
		t.Fatalf("not ready: %v, want the status and the reason", err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := Probe(short, srv.URL, "/slow"); err == nil {
		t.Fatal("a probe past its deadline succeeded")
	}
	url := srv.URL
	srv.Close()
	if err := Probe(ctx, url, "/health"); err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("stopped server: %v, want an error naming the URL", err)
	}
}

func TestLocalURLReachesWildcardThroughLoopback(t *testing.T) {
	for host, want := range map[string]string{
		"0.0.0.0": "http://127.0.0.1:4000", "": "http://127.0.0.1:4000", "::": "http://127.0.0.1:4000",
		"10.1.2.3": "http://10.1.2.3:4000", "::1": "http://[::1]:4000",
	} {
		if got := LocalURL(host, 4000); got != want {
			t.Errorf("LocalURL(%q) = %s, want %s", host, got, want)
		}
	}
}
