package scalerconfig

import (
	"strings"
	"testing"
)

const qemuDoc = `version: 1
scalers:
  - name: vm
    type: qemu
    maxAgents: 1
    kernelPath: /k/vmlinuz
    initrdPath: /k/initramfs.cpio
%s    labelSets:
      - labels: [vm]
%s`

// A qemu scaler's network is user by default; tap puts it on the
// firecracker: block's bridge (defaulted when absent); anything else, the
// field on another type, or a firecracker: block nobody uses is refused
// with the field named.
func TestQEMUNetworkField(t *testing.T) {
	parse := func(fields, tail string) (*Config, error) {
		return Parse("scalers.yaml", []byte(strings.Replace(strings.Replace(qemuDoc, "%s", fields, 1), "%s", tail, 1)))
	}
	c, err := parse("", "")
	if err != nil || c.Scalers[0].GuestNetwork != NetworkUser || c.Scalers[0].Network != nil {
		t.Fatalf("default: %v, network %q bridge %v", err, c.Scalers[0].GuestNetwork, c.Scalers[0].Network)
	}
	c, err = parse("    network: tap\n", "firecracker: { cidr: 10.9.0.0/24, bridgeName: br-vm }\n")
	if err != nil || c.Scalers[0].Network == nil || c.Scalers[0].Network.BridgeName != "br-vm" || c.Scalers[0].Network.GatewayAddr().String() != "10.9.0.1" {
		t.Fatalf("tap: %v, %+v", err, c.Scalers[0].Network)
	}
	c, err = parse("    network: tap\n", "")
	if err != nil || c.Scalers[0].Network == nil || c.Scalers[0].Network.BridgeName != DefaultFCBridge {
		t.Fatalf("tap without a firecracker: block: %v, want the defaults", err)
	}
	for name, tc := range map[string]struct{ fields, tail, want string }{
		"bad value":      {"    network: bridge\n", "", "scalers[0].network"},
		"unused block":   {"", "firecracker: { cidr: 10.9.0.0/24 }\n", "no scaler has type firecracker (or type qemu with network: tap)"},
		"bad bridge net": {"    network: tap\n", "firecracker: { cidr: 10.9.0.0/8 }\n", "firecracker.cidr"},
	} {
		if _, err := parse(tc.fields, tc.tail); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	_, err = Parse("scalers.yaml", []byte("version: 1\nscalers:\n  - name: m\n    type: bare-metal\n    maxAgents: 1\n    network: tap\n    labelSets:\n      - labels: [x]\n"))
	if err == nil || !strings.Contains(err.Error(), "network") || !strings.Contains(err.Error(), "qemu scalers only") {
		t.Errorf("network on a bare-metal scaler: %v", err)
	}
}
