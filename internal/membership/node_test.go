package membership

import "testing"

// A node's registry address becomes the WebSocket URL its agents dial.
func TestWSURLOfNodeAddress(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4000":  "ws://127.0.0.1:4000/ws",
		"http://10.0.0.2:4000/":  "ws://10.0.0.2:4000/ws",
		"https://ci.example.com": "wss://ci.example.com/ws",
		"http://[::1]:4000":      "ws://[::1]:4000/ws",
	} {
		if got := WSURL(in); got != want {
			t.Errorf("WSURL(%q) = %q, want %q", in, got, want)
		}
	}
}
