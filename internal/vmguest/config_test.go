package vmguest

import (
	"strings"
	"testing"
)

// A boot configuration for a bridge network carries the guest's address
// with its prefix and a gateway inside it; anything else is refused
// before the guest configures its interface. Without them the guest is on
// QEMU's user network.
func TestParseConfigBridgeAddress(t *testing.T) {
	c, err := ParseConfig([]byte(`{"env":["A=1"],"forwards":[],"address":"10.9.0.2/24","gateway":"10.9.0.1"}`))
	if err != nil || c.Address != "10.9.0.2/24" || c.Gateway != "10.9.0.1" {
		t.Fatalf("bridge configuration: %+v %v", c, err)
	}
	if c, err := ParseConfig([]byte(`{"env":["A=1"],"forwards":["127.0.0.1:4000"]}`)); err != nil || c.Address != "" {
		t.Fatalf("user-network configuration: %+v %v", c, err)
	}
	for _, doc := range []string{
		`{"env":[],"address":"10.9.0.2/24","gateway":"10.8.0.1"}`,
		`{"env":[],"address":"10.9.0.2","gateway":"10.9.0.1"}`,
		`{"env":[],"address":"fd00::2/64","gateway":"fd00::1"}`,
		`{"env":[],"gateway":"10.9.0.1"}`,
	} {
		if _, err := ParseConfig([]byte(doc)); err == nil || !strings.Contains(err.Error(), "address") {
			t.Errorf("%s: %v, want refused naming the address", doc, err)
		}
	}
}
