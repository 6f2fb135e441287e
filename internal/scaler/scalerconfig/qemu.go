package scalerconfig

import (
	"fmt"
	"path/filepath"
)

// TypeQEMU is the microVM backend driven through QEMU: a VM per job on any
// Linux host, with KVM where it works and software emulation (TCG) where
// it does not (docs/scaling.md, "QEMU microVMs").
const TypeQEMU BackendType = "qemu"

// QEMU defaults.
const (
	// DefaultQEMUPath is looked up in PATH.
	DefaultQEMUPath = "qemu-system-x86_64"
	// DefaultVMDir holds one directory per VM (initramfs copy, console log,
	// record for the orphan sweep).
	DefaultVMDir = "/var/lib/kici/vms"
	// DefaultQEMUUser is the uid and gid QEMU runs as (nobody/nogroup).
	DefaultQEMUUser = 65534
)

// Accel is how a qemu scaler's guests are accelerated, its `accel`: one of
// the Accel* constants (kici's qemu backend, docs/scaling.md).
type Accel string

// Accelerations of a qemu scaler (accel).
const (
	// AccelAuto boots a probe with KVM at start and falls back to TCG when
	// it fails (the default).
	AccelAuto Accel = "auto"
	// AccelKVM uses hardware virtualisation (/dev/kvm) and fails without it.
	AccelKVM Accel = "kvm"
	// AccelTCG uses QEMU's software emulation.
	AccelTCG Accel = "tcg"
)

// GuestNetwork is how a qemu scaler's guests reach the network, its
// `network`: NetworkUser or NetworkTap (kici's qemu backend, docs/scaling.md).
type GuestNetwork string

// Networks of a qemu scaler's guests (network).
const (
	// NetworkUser is QEMU's user-mode network, restricted to forwarded
	// ports (the orchestrator's and hostPorts).
	NetworkUser GuestNetwork = "user"
	// NetworkTap puts each guest on the bridge of the file's firecracker:
	// block through a TAP of its own, with an address from its subnet and
	// the same nftables contract as Firecracker VMs.
	NetworkTap GuestNetwork = "tap"
)

// QEMUEntry are the qemu-only fields of a scaler entry. kernelPath,
// uid, gid, vcpuCount and memSizeMib are shared with firecracker scalers
// (FirecrackerEntry).
type QEMUEntry struct {
	// QEMUPath is the qemu-system-x86_64 binary (default: from PATH).
	QEMUPath string `yaml:"qemuPath" json:"qemuPath,omitempty"`
	// InitrdPath is the guest's root file system as an initramfs (newc
	// cpio, `make vm-image`); required, absolute.
	InitrdPath string `yaml:"initrdPath" json:"initrdPath,omitempty"`
	// Accel is auto (default), kvm or tcg.
	Accel Accel `yaml:"accel" json:"accel,omitempty"`
	// Machine is QEMU's machine type: microvm (default) or pc.
	Machine string `yaml:"machine" json:"machine,omitempty"`
	// VMDir holds the VMs' directories (default /var/lib/kici/vms).
	VMDir string `yaml:"vmDir" json:"vmDir,omitempty"`
	// HostPorts are ports of the host's 127.0.0.1 the guests may reach
	// besides the orchestrator's (a git server, a registry). Nothing else
	// of the host or its networks is reachable from a guest.
	HostPorts []int `yaml:"hostPorts" json:"hostPorts,omitempty"`
	// GuestNetwork (network) is user (default) or tap (NetworkUser,
	// NetworkTap). With tap, hostPorts are ports of the bridge's gateway
	// address.
	GuestNetwork GuestNetwork `yaml:"network" json:"network,omitempty"`
}

// validateQEMU checks and defaults a qemu entry (path p).
func (e *Entry) validateQEMU(p string) error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{File: e.file, Field: p + field, Msg: fmt.Sprintf(format, a...)}
	}
	q, f := &e.QEMUEntry, &e.FirecrackerEntry
	if f.FirecrackerPath != "" || f.JailerPath != "" || f.ChrootBaseDir != "" {
		return bad(".firecrackerPath", "firecrackerPath, jailerPath and chrootBaseDir apply to firecracker scalers only (a qemu scaler has qemuPath and vmDir)")
	}
	if q.QEMUPath == "" {
		q.QEMUPath = DefaultQEMUPath
	}
	for _, c := range [][2]string{{"kernelPath", f.KernelPath}, {"initrdPath", q.InitrdPath}} {
		if c[1] == "" {
			return bad("."+c[0], "required for qemu scalers (`make vm-image` builds both)")
		}
		if !filepath.IsAbs(c[1]) {
			return bad("."+c[0], "must be an absolute path")
		}
	}
	switch q.Accel {
	case "":
		q.Accel = AccelAuto
	case AccelAuto, AccelKVM, AccelTCG:
	default:
		return bad(".accel", "must be auto, kvm or tcg (got %q)", q.Accel)
	}
	switch q.Machine {
	case "":
		q.Machine = "microvm"
	case "microvm", "pc":
	default:
		return bad(".machine", "must be microvm or pc (got %q)", q.Machine)
	}
	switch q.GuestNetwork {
	case "":
		q.GuestNetwork = NetworkUser
	case NetworkUser, NetworkTap:
	default:
		return bad(".network", "must be user or tap (got %q)", q.GuestNetwork)
	}
	if q.VMDir == "" {
		q.VMDir = DefaultVMDir
	}
	if !filepath.IsAbs(q.VMDir) {
		return bad(".vmDir", "must be an absolute path")
	}
	for j, port := range q.HostPorts {
		if port < 1 || port > 65535 {
			return bad(fmt.Sprintf(".hostPorts[%d]", j), "must be a TCP port (1–65535), got %d", port)
		}
	}
	if f.UID == nil {
		f.UID = intPtr(DefaultQEMUUser)
	}
	if f.GID == nil {
		f.GID = intPtr(DefaultQEMUUser)
	}
	if *f.UID < 0 || *f.GID < 0 {
		return bad(".uid", "uid and gid must be non-negative")
	}
	if err := f.validateVMSize(); err != nil {
		return bad(err.field, "%s", err.msg)
	}
	for j, ls := range e.LabelSets {
		if ls == nil {
			continue
		}
		lp := fmt.Sprintf(".labelSets[%d]", j)
		switch {
		case ls.Image != "" || ls.ImagePullPolicy != "":
			return bad(lp+".image", "applies to container scalers only")
		case ls.BinaryPath != "":
			return bad(lp+".binaryPath", "applies to bare-metal scalers only")
		case ls.RootfsPath != "":
			return bad(lp+".rootfsPath", "applies to firecracker scalers only (a qemu guest's root is its initramfs, initrdPath)")
		case ls.FirecrackerLabelSet.KernelPath != "" && !filepath.IsAbs(ls.FirecrackerLabelSet.KernelPath):
			return bad(lp+".kernelPath", "must be an absolute path")
		}
	}
	return nil
}

// refuseQEMUFields refuses the qemu-only fields on another type.
func (e *Entry) refuseQEMUFields(p string) error {
	q := e.QEMUEntry
	for _, c := range []struct {
		field string
		set   bool
	}{{"qemuPath", q.QEMUPath != ""}, {"initrdPath", q.InitrdPath != ""}, {"accel", q.Accel != ""},
		{"machine", q.Machine != ""}, {"vmDir", q.VMDir != ""}, {"hostPorts", len(q.HostPorts) > 0},
		{"network", q.GuestNetwork != ""}} {
		if c.set {
			return &ConfigError{File: e.file, Field: p + "." + c.field, Msg: "applies to qemu scalers only"}
		}
	}
	return nil
}

func intPtr(v int) *int { return &v }

// usesBridge reports whether e's VMs join the firecracker: block's bridge
// (a firecracker scaler, or a qemu scaler with network: tap).
func (e *Entry) usesBridge() bool {
	return e.Type == TypeFirecracker || (e.Type == TypeQEMU && e.GuestNetwork == NetworkTap)
}

// QEMUImmutableChanged reports whether a reload changes a qemu scaler's
// fields its running backend keeps (network and, with tap, the
// firecracker: block; vmDir, uid, gid).
func QEMUImmutableChanged(a, b *Entry) bool {
	if a.Type != TypeQEMU || b.Type != TypeQEMU {
		return false
	}
	if a.GuestNetwork != b.GuestNetwork || a.VMDir != b.VMDir || *a.UID != *b.UID || *a.GID != *b.GID {
		return true
	}
	na, nb := a.Network, b.Network
	if na == nil || nb == nil {
		return na != nb
	}
	return na.CIDR != nb.CIDR || na.Gateway != nb.Gateway || na.BridgeName != nb.BridgeName || na.Table != nb.Table ||
		*na.AutoProvisionHost != *nb.AutoProvisionHost
}
