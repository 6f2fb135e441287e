package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client talks to the orchestrator's job blob routes (jobblobs.CachePath,
// jobblobs.ArtifactPath) for one job.
type Client struct {
	// BaseURL is the orchestrator's HTTP base (http://host:port).
	BaseURL string
	// JobID and Credential identify the job (JobDispatch.JobCredential).
	JobID, Credential string
	// HTTP is the client (http.DefaultClient when nil).
	HTTP *http.Client
}

// BaseURLFromWS derives the HTTP base from the agent's WebSocket URL
// (ws://host:port/ws → http://host:port).
func BaseURLFromWS(ws string) (string, error) {
	u, err := url.Parse(ws)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	case "http", "https":
	default:
		return "", fmt.Errorf("orchestrator URL %q: unsupported scheme", ws)
	}
	u.Path, u.RawQuery, u.Fragment = "", "", ""
	return strings.TrimSuffix(u.String(), "/"), nil
}

// ErrMiss is a cache or artifact that does not exist.
var ErrMiss = errors.New("not found")

// StatusError is a refusal from the orchestrator.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Msg) }

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+c.Credential)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &body) != nil || body.Error == "" {
		body.Error = strings.TrimSpace(string(b))
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %s", ErrMiss, body.Error)
	}
	return nil, &StatusError{Code: resp.StatusCode, Msg: body.Error}
}

// Download is a streaming download: read Body to its end, then call Verify
// to compare the bytes read with the digest the orchestrator recorded.
type Download struct {
	Body io.ReadCloser
	// SHA256 is the recorded digest; Key the restored cache key ("" for
	// artifacts); Exact whether Key is the requested key of the job's own
	// scope.
	SHA256 string
	Key    string
	Exact  bool
	h      hash.Hash
}

// Verify reports a digest mismatch (after Body was read to its end).
func (d *Download) Verify() error {
	if got := hex.EncodeToString(d.h.Sum(nil)); got != d.SHA256 {
		return fmt.Errorf("downloaded content has sha256 %s, the orchestrator recorded %s", got, d.SHA256)
	}
	return nil
}

func newDownload(resp *http.Response) *Download {
	d := &Download{SHA256: resp.Header.Get("X-Kici-Sha256"), Key: resp.Header.Get("X-Kici-Cache-Key"),
		Exact: resp.Header.Get("X-Kici-Cache-Exact") == "true", h: sha256.New()}
	d.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, d.h), resp.Body}
	return d
}

func (c *Client) path(p string) string {
	return c.BaseURL + "/api/v1/jobs/" + url.PathEscape(c.JobID) + p
}

// RestoreCache asks for key, falling back to restoreKeys; ErrMiss on a miss.
func (c *Client) RestoreCache(ctx context.Context, key string, restoreKeys []string) (*Download, error) {
	q := url.Values{"key": {key}}
	for _, rk := range restoreKeys {
		q.Add("restoreKey", rk)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.path("/cache?"+q.Encode()), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	return newDownload(resp), nil
}

// SaveCache streams body as cache key.
func (c *Client) SaveCache(ctx context.Context, key string, body io.Reader) (Uploaded, error) {
	return c.put(ctx, c.path("/cache?"+url.Values{"key": {key}}.Encode()), body)
}

// UploadArtifact streams body as the job's artifact name.
func (c *Client) UploadArtifact(ctx context.Context, name string, body io.Reader) (Uploaded, error) {
	return c.put(ctx, c.path("/artifacts/"+url.PathEscape(name)), body)
}

// DownloadArtifact opens the run's artifact name.
func (c *Client) DownloadArtifact(ctx context.Context, name string) (*Download, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.path("/artifacts/"+url.PathEscape(name)), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	return newDownload(resp), nil
}

// Uploaded is the orchestrator's record of an upload.
type Uploaded struct {
	SizeBytes int64  `json:"sizeBytes"`
	SHA256    string `json:"sha256"`
}

func (c *Client) put(ctx context.Context, u string, body io.Reader) (Uploaded, error) {
	var up Uploaded
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, body)
	if err != nil {
		return up, err
	}
	req.Header.Set("Content-Type", "application/zstd")
	resp, err := c.do(req)
	if err != nil {
		return up, err
	}
	defer resp.Body.Close()
	return up, json.NewDecoder(resp.Body).Decode(&up)
}
