package scaler

import (
	"slices"
	"strings"
	"testing"
)

// On the bridge network QEMU attaches the guest's card to its TAP (no
// helper scripts, the MAC derived from its address) instead of the user
// network and its forwards.
func TestQEMUArgsTapNetwork(t *testing.T) {
	args := qemuArgs(qemuSpec{id: "scaler-qemu-0000abcd", machine: "microvm", accel: AccelTCG, vcpus: 1, memMib: 512,
		kernel: "/k", initrd: "/i", console: "/c", tap: "kici-0000abcd", mac: "06:00:AC:00:00:02",
		forwards: []vmForward{{GuestPort: 4000, Target: "127.0.0.1:4000"}}})
	joined := strings.Join(args, " ")
	if !slices.Contains(args, "tap,id=n0,ifname=kici-0000abcd,script=no,downscript=no") ||
		!slices.Contains(args, "virtio-net-device,netdev=n0,mac=06:00:AC:00:00:02") || strings.Contains(joined, "guestfwd") {
		t.Fatalf("QEMU arguments on the bridge network: %q", args)
	}
	user := strings.Join(qemuArgs(qemuSpec{id: "x", machine: "pc", accel: AccelTCG, vcpus: 1, memMib: 512,
		kernel: "/k", initrd: "/i", console: "/c", forwards: []vmForward{{GuestPort: 4000, Target: "127.0.0.1:4000"}}}), " ")
	if !strings.Contains(user, "-netdev user,id=n0,restrict=on,guestfwd=tcp:") || !strings.Contains(user, "virtio-net-pci,netdev=n0 ") && !strings.HasSuffix(user, "virtio-net-pci,netdev=n0") {
		t.Fatalf("QEMU arguments on the user network: %s", user)
	}
}
