package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Client calls the orchestrator's HTTP API.
type Client struct {
	// BaseURL is the orchestrator base URL, e.g. "http://127.0.0.1:4000".
	BaseURL string
	// Token is the admin bearer token.
	Token string
	// HTTP performs the requests.
	HTTP *http.Client
}

// HTTPError is a non-2xx answer. It prints as "HTTP <status>: <body.error>".
type HTTPError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the body's "error" field, else the trimmed body, else the
	// status text.
	Message string
}

// Error implements error.
func (e *HTTPError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message) }

// Request performs method path?query with an optional JSON body and extra
// headers. withAuth adds the bearer token. It returns the raw response body
// of a 2xx answer, *HTTPError otherwise, or a connection error with a hint.
func (c *Client) Request(ctx context.Context, method, path string, query url.Values, body []byte, headers map[string]string, withAuth bool) ([]byte, int, error) {
	u := c.BaseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if withAuth && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, 0, fmt.Errorf("cannot connect to the orchestrator at %s (connection refused): is kici-orchestrator running? Start it, or pass --url", c.BaseURL)
		}
		return nil, 0, fmt.Errorf("request to %s failed: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading response from %s: %w", c.BaseURL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return data, resp.StatusCode, &HTTPError{Status: resp.StatusCode, Message: errorMessage(resp.StatusCode, data)}
	}
	return data, resp.StatusCode, nil
}

func errorMessage(status int, body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	if s := strings.TrimSpace(string(body)); s != "" {
		if len(s) > 500 {
			s = s[:500] + "…"
		}
		return s
	}
	return http.StatusText(status)
}

// Get performs an authenticated GET and decodes the JSON answer into out
// (when non-nil). It returns the raw body too.
func (c *Client) Get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	data, _, err := c.Request(ctx, http.MethodGet, path, query, nil, nil, true)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("decoding response of GET %s: %w", path, err)
		}
	}
	return data, nil
}

// Post performs an authenticated POST of in as JSON and decodes the answer
// into out (when non-nil). It returns the raw body too.
func (c *Client) Post(ctx context.Context, path string, in, out any) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	data, _, err := c.Request(ctx, http.MethodPost, path, nil, body, nil, true)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("decoding response of POST %s: %w", path, err)
		}
	}
	return data, nil
}

// call performs an authenticated request with an optional JSON body and
// decodes the answer into out.
func (a *app) call(cmd *cobra.Command, method, path string, query url.Values, in, out any) ([]byte, error) {
	c, err := a.api()
	if err != nil {
		return nil, err
	}
	var body []byte
	if in != nil {
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	data, _, err := c.Request(cmd.Context(), method, path, query, body, nil, true)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("decoding response of %s %s: %w", method, path, err)
		}
	}
	return data, nil
}

// deleteAndConfirm sends DELETE path?query and, unless --json printed the
// answer, prints confirmation: what the delete commands say on success.
func (a *app) deleteAndConfirm(cmd *cobra.Command, path string, query url.Values, confirmation string) error {
	if printed, err := a.callJSON(cmd, http.MethodDelete, path, query, nil, nil); printed || err != nil {
		return err
	}
	fmt.Fprintln(a.out(), confirmation)
	return nil
}

// callJSON is call for commands with a --json mode: with --json it prints the
// raw answer and reports printed, so the caller renders out only when it did
// not (and on no error).
func (a *app) callJSON(cmd *cobra.Command, method, path string, query url.Values, in, out any) (printed bool, err error) {
	raw, err := a.call(cmd, method, path, query, in, out)
	if err != nil {
		return false, err
	}
	if a.json {
		printJSON(a.out(), raw)
		return true, nil
	}
	return false, nil
}
