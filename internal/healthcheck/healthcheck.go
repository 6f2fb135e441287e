// Package healthcheck probes a running orchestrator's /health (or /ready)
// endpoint and turns the answer into an exit status, for container
// HEALTHCHECK instructions and service managers on images that carry no
// HTTP client (the orchestrator image is FROM scratch: no curl, no wget).
package healthcheck

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultTimeout bounds one probe: connect, request and answer.
const DefaultTimeout = 5 * time.Second

// LocalURL is the base URL a probe on the orchestrator's own host dials for
// a server configured with KICI_HOST=host and KICI_PORT=port: a wildcard
// listen address (empty, 0.0.0.0, ::) is reached through loopback.
func LocalURL(host string, port int) string {
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// Probe GETs base+path ("/health" answers while the process serves HTTP,
// "/ready" also checks the database) and returns nil on HTTP 200. Any other
// status is an error quoting the first 200 bytes of the body; a connection
// failure or a timeout (ctx, or DefaultTimeout if ctx has no deadline) is an
// error naming the URL.
func Probe(ctx context.Context, base, path string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	url := base + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health check %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health check %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check %s: HTTP %d %s", url, resp.StatusCode, body)
	}
	return nil
}
