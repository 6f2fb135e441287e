package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strings"
	"time"
)

// servePprof serves Go's profiling endpoints (net/http/pprof, under
// /debug/pprof/) on their own listener at KICI_PPROF_ADDR, never on the
// main one: they have no authentication, so the operator chooses where
// they are reachable (a loopback address). Unset or empty serves nothing.
// A bad address is an error and the orchestrator does not start.
func servePprof(logger *slog.Logger) error {
	addr := strings.TrimSpace(os.Getenv("KICI_PPROF_ADDR"))
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.New("KICI_PPROF_ADDR: " + err.Error())
	}
	// Blocking and lock contention are sampled too (one event per ms
	// blocked, one in 100 contended locks), so /debug/pprof/block and
	// /debug/pprof/mutex show where goroutines wait, at a small cost paid
	// only while the endpoint is on.
	runtime.SetBlockProfileRate(int(time.Millisecond))
	runtime.SetMutexProfileFraction(100)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Warn("profiling endpoints served without authentication", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() { _ = srv.Serve(ln) }()
	return nil
}
