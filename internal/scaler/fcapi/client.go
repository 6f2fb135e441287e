// Package fcapi is a small client for the Firecracker VMM API, served over
// HTTP on the VMM's unix socket (Firecracker's swagger definition,
// src/firecracker/swagger/firecracker.yaml). It covers what the scaler's
// Firecracker backend configures before boot (machine config, boot source,
// drives, network interfaces, MMDS) and the two actions it uses
// (InstanceStart, SendCtrlAltDel). Every call honours its context.
package fcapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Client talks to one Firecracker process through its API socket.
type Client struct {
	socket string
	hc     *http.Client
}

// New returns a client for the API socket at socketPath (a host path).
func New(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		DisableKeepAlives: true,
	}
	return &Client{socket: socketPath, hc: &http.Client{Transport: tr}}
}

// Error is a non-2xx answer: the HTTP status and Firecracker's
// fault_message (or the raw body when it has none).
type Error struct {
	Method, Path string
	Status       int
	FaultMessage string
}

func (e *Error) Error() string {
	return fmt.Sprintf("firecracker %s %s: %d: %s", e.Method, e.Path, e.Status, e.FaultMessage)
}

// MachineConfig is PUT /machine-config.
type MachineConfig struct {
	VcpuCount  int  `json:"vcpu_count"`
	MemSizeMib int  `json:"mem_size_mib"`
	Smt        bool `json:"smt"`
}

// BootSource is PUT /boot-source; paths are as the VMM sees them (inside
// the jail).
type BootSource struct {
	KernelImagePath string `json:"kernel_image_path"`
	BootArgs        string `json:"boot_args,omitempty"`
}

// Drive is PUT /drives/{drive_id}.
type Drive struct {
	DriveID      string `json:"drive_id"`
	PathOnHost   string `json:"path_on_host"`
	IsRootDevice bool   `json:"is_root_device"`
	IsReadOnly   bool   `json:"is_read_only"`
}

// NetworkInterface is PUT /network-interfaces/{iface_id}.
type NetworkInterface struct {
	IfaceID     string `json:"iface_id"`
	HostDevName string `json:"host_dev_name"`
	GuestMAC    string `json:"guest_mac,omitempty"`
}

// MMDSConfig is PUT /mmds/config.
type MMDSConfig struct {
	Version           string   `json:"version,omitempty"`
	NetworkInterfaces []string `json:"network_interfaces"`
	IPv4Address       string   `json:"ipv4_address,omitempty"`
}

// Action types of PUT /actions.
const (
	ActionInstanceStart  = "InstanceStart"
	ActionSendCtrlAltDel = "SendCtrlAltDel"
)

// PutMachineConfig sets vCPUs and memory (pre-boot only).
func (c *Client) PutMachineConfig(ctx context.Context, m MachineConfig) error {
	return c.put(ctx, "/machine-config", m)
}

// PutBootSource sets the kernel and its command line (pre-boot only).
func (c *Client) PutBootSource(ctx context.Context, b BootSource) error {
	return c.put(ctx, "/boot-source", b)
}

// PutDrive adds or replaces drive d.DriveID (pre-boot only).
func (c *Client) PutDrive(ctx context.Context, d Drive) error {
	return c.put(ctx, "/drives/"+url.PathEscape(d.DriveID), d)
}

// PutNetworkInterface adds interface n.IfaceID on a TAP (pre-boot only).
func (c *Client) PutNetworkInterface(ctx context.Context, n NetworkInterface) error {
	return c.put(ctx, "/network-interfaces/"+url.PathEscape(n.IfaceID), n)
}

// PutMMDSConfig enables MMDS on the given interfaces (pre-boot only).
func (c *Client) PutMMDSConfig(ctx context.Context, m MMDSConfig) error {
	return c.put(ctx, "/mmds/config", m)
}

// PutMMDS replaces the whole MMDS data store with data (a JSON object).
func (c *Client) PutMMDS(ctx context.Context, data any) error {
	return c.put(ctx, "/mmds", data)
}

// Action runs PUT /actions with action_type t.
func (c *Client) Action(ctx context.Context, t string) error {
	return c.put(ctx, "/actions", map[string]string{"action_type": t})
}

// WaitReady polls the socket until the API answers GET / or ctx ends.
func (c *Client) WaitReady(ctx context.Context, poll time.Duration) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/", nil)
		if err != nil {
			return err
		}
		resp, err := c.hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			return fmt.Errorf("firecracker API at %s not ready: %w (%v)", c.socket, ctx.Err(), err)
		case <-time.After(poll):
		}
	}
}

func (c *Client) put(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://localhost"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("firecracker PUT %s: %w", path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	e := &Error{Method: http.MethodPut, Path: path, Status: resp.StatusCode}
	var f struct {
		FaultMessage string `json:"fault_message"`
	}
	if json.Unmarshal(rb, &f) == nil && f.FaultMessage != "" {
		e.FaultMessage = f.FaultMessage
	} else {
		e.FaultMessage = string(bytes.TrimSpace(rb))
	}
	return e
}
