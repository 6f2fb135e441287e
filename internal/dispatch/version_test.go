package dispatch

import (
	"testing"

	"kici.dev/kici/internal/protocol"
)

// TestHandshakeUnsupportedVersionsClose4005: a version this build does not
// speak, older or newer, gets auth.failure and close 4005 (docs/protocol.md);
// the supported range still authenticates.
func TestHandshakeUnsupportedVersionsClose4005(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for _, v := range []int{protocol.MinVersion - 1, protocol.Version + 1, 99} {
		c := h.dial()
		c.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: h.staticToken(), ProtocolVersion: v})
		code, got := c.closed()
		if code != protocol.CloseProtocolError {
			t.Fatalf("protocolVersion %d: close %d, want 4005 (received %v)", v, code, got)
		}
		if len(got) != 1 {
			t.Fatalf("protocolVersion %d: received %v, want one auth.failure", v, got)
		}
		if _, ok := got[0].(*protocol.AuthFailure); !ok {
			t.Fatalf("protocolVersion %d: received %T, want auth.failure", v, got[0])
		}
	}
	for v := protocol.MinVersion; v <= protocol.Version; v++ {
		c := h.dial()
		c.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: h.staticToken(), ProtocolVersion: v})
		if _, ok := c.read().(*protocol.AuthSuccess); !ok {
			t.Fatalf("protocolVersion %d: no auth.success", v)
		}
	}
}
