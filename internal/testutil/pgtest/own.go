package pgtest

import (
	"context"
	"net/url"
	"syscall"
	"testing"
	"time"
)

// Server is a throwaway PostgreSQL server of one test's own, for tests
// that stop the database and start it again (readiness with the database
// down): the shared server of URL is never stopped under other tests.
type Server struct{ s *server }

// NewServer starts a server for t alone, on a free 127.0.0.1 port, and
// removes it at t.Cleanup. The test fails (never skips) if it cannot start.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatalf("pgtest: cannot start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := s.remove(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return &Server{s: s}
}

// URL creates a new, empty database on the server and returns its URL.
func (p *Server) URL(t testing.TB) string {
	t.Helper()
	name := "kici_test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, p.s.adminURL, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	u, err := url.Parse(p.s.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Stop shuts the server down as `systemctl stop postgresql` does (fast
// shutdown: clients see their connections dropped and new ones refused);
// its data, committed transactions included, stays for Start. (An
// immediate shutdown would lose the last commits: the throwaway server
// runs with fsync and synchronous_commit off.)
func (p *Server) Stop(t testing.TB) {
	t.Helper()
	if err := p.s.halt(syscall.SIGINT); err != nil {
		t.Fatalf("pgtest: stop: %v", err)
	}
}

// Start starts the stopped server again on the same port and data, and
// waits until it accepts connections.
func (p *Server) Start(t testing.TB) {
	t.Helper()
	if err := p.s.run(p.s.bin, p.s.data, p.s.port, p.s.cred); err != nil {
		t.Fatalf("pgtest: start again: %v", err)
	}
}
