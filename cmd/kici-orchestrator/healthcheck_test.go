package main

import "testing"

// `healthcheck --help` teaches and succeeds; a stray argument is bad usage
// (2), not silently ignored.
func TestHealthCheckUsage(t *testing.T) {
	if code := healthCheck([]string{"--help"}); code != 0 {
		t.Errorf("healthcheck --help: exit %d, want 0", code)
	}
	if code := healthCheck([]string{"extra"}); code != 2 {
		t.Errorf("healthcheck extra: exit %d, want 2", code)
	}
	if code := healthCheck([]string{"--no-such-flag"}); code != 2 {
		t.Errorf("healthcheck --no-such-flag: exit %d, want 2", code)
	}
}
