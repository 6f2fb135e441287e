package scalerconfig

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
)

// TypeFirecracker is the Firecracker microVM backend type (KiCI).
const TypeFirecracker BackendType = "firecracker"

// Firecracker defaults (KiCI scalerEntrySchema and firecrackerNetworkSchema).
const (
	DefaultChrootBaseDir = "/srv/jailer"
	DefaultVcpuCount     = 2
	DefaultMemSizeMib    = 512
	DefaultFCCIDR        = "10.0.0.0/24"
	DefaultFCBridge      = "kici-br0"
	DefaultFCTable       = "kici"
)

// JailAPISock is the firecracker API socket inside a VM's jail (the root the
// jailed firecracker sees); validation bounds chrootBaseDir by its length.
const JailAPISock = "/run/firecracker.socket"

// FirecrackerEntry are the firecracker-only fields of a scaler entry
// (KiCI); they are refused on other types.
type FirecrackerEntry struct {
	// FirecrackerPath is the firecracker binary the jailer executes
	// (--exec-file; required, absolute; its name must contain
	// "firecracker", as the jailer demands).
	FirecrackerPath string `yaml:"firecrackerPath" json:"firecrackerPath,omitempty"`
	// JailerPath is the jailer binary (required, absolute).
	JailerPath string `yaml:"jailerPath" json:"jailerPath,omitempty"`
	// KernelPath is the uncompressed guest kernel (vmlinux; required,
	// absolute); a label set may override it.
	KernelPath string `yaml:"kernelPath" json:"kernelPath,omitempty"`
	// UID and GID are the unprivileged ids the jailer drops to (required).
	UID *int `yaml:"uid" json:"uid,omitempty"`
	GID *int `yaml:"gid" json:"gid,omitempty"`
	// ChrootBaseDir is the jailer's --chroot-base-dir (default /srv/jailer);
	// each VM lives in <chrootBaseDir>/<basename firecrackerPath>/<agentId>/.
	ChrootBaseDir string `yaml:"chrootBaseDir" json:"chrootBaseDir,omitempty"`
	// VcpuCount and MemSizeMib size VMs whose label set has no resources
	// (defaults 2 and 512); resources cpus (rounded up) and memory (floored
	// to MiB) win.
	VcpuCount  int `yaml:"vcpuCount" json:"vcpuCount,omitempty"`
	MemSizeMib int `yaml:"memSizeMib" json:"memSizeMib,omitempty"`

	// Network is the file's firecracker: block, set by validation (not
	// read from the entry itself).
	Network *FirecrackerNetwork `yaml:"-" json:"-"`
}

// FirecrackerLabelSet are the firecracker-only fields of a label set.
type FirecrackerLabelSet struct {
	// RootfsPath is the guest root filesystem image (ext4; required for
	// firecracker, absolute). It is attached read-only.
	RootfsPath string `yaml:"rootfsPath" json:"rootfsPath,omitempty"`
	// KernelPath overrides the scaler's kernelPath for this shape.
	KernelPath string `yaml:"kernelPath" json:"kernelPath,omitempty"`
}

// FirecrackerNetwork is the top-level `firecracker:` block shared by every
// Firecracker scaler of the file (KiCI firecrackerNetworkSchema). KiCI's
// `netmask` is not accepted: the mask is the CIDR's.
type FirecrackerNetwork struct {
	// CIDR is the VM subnet (IPv4, /16–/30; default 10.0.0.0/24).
	CIDR string `yaml:"cidr" json:"cidr"`
	// BridgeName is the host bridge the TAPs join (default kici-br0).
	BridgeName string `yaml:"bridgeName" json:"bridgeName"`
	// Gateway is the bridge's address inside CIDR (default: the first
	// host address); VMs use it as their default route.
	Gateway string `yaml:"gateway" json:"gateway"`
	// Table is the nftables table (family inet) holding the isolation
	// rules (default kici); unique per bridge.
	Table string `yaml:"table" json:"table"`
	// AutoProvisionHost (default true) lets the backend create the bridge
	// and the nftables table at start when missing; false only verifies.
	AutoProvisionHost *bool `yaml:"autoProvisionHost" json:"autoProvisionHost,omitempty"`

	prefix netip.Prefix
	gw     netip.Addr
}

var (
	ifNameRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)
	nftNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,31}$`)
)

// validateFirecrackerNetwork defaults and checks the firecracker: block
// and hands it to every firecracker entry; the block is refused when no
// scaler uses it.
func (c *Config) validateFirecrackerNetwork() error {
	top := func(field, format string, a ...any) error {
		return &ConfigError{File: c.mainFile, Field: "firecracker." + field, Msg: fmt.Sprintf(format, a...)}
	}
	used := false
	for _, e := range c.Scalers {
		used = used || e.usesBridge()
	}
	if c.Firecracker != nil && !used {
		return &ConfigError{File: c.mainFile, Field: "firecracker", Msg: "no scaler has type firecracker (or type qemu with network: tap)"}
	}
	if !used {
		return nil
	}
	n := c.Firecracker
	if n == nil {
		n = &FirecrackerNetwork{}
		c.Firecracker = n
	}
	if n.CIDR == "" {
		n.CIDR = DefaultFCCIDR
	}
	p, err := netip.ParsePrefix(n.CIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() < 16 || p.Bits() > 30 || p.Masked() != p {
		return top("cidr", "must be an IPv4 network address with a prefix length from /16 to /30 (got %q)", n.CIDR)
	}
	n.prefix = p
	if n.Gateway == "" {
		n.Gateway = p.Addr().Next().String()
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil || !p.Contains(gw) || gw == p.Addr() || gw == LastAddr(p) {
		return top("gateway", "must be a host address inside %s (got %q)", n.CIDR, n.Gateway)
	}
	n.gw = gw
	if n.BridgeName == "" {
		n.BridgeName = DefaultFCBridge
	}
	if !ifNameRe.MatchString(n.BridgeName) {
		return top("bridgeName", "invalid interface name %q (1–15 characters of letters, digits, _ . -)", n.BridgeName)
	}
	if n.Table == "" {
		n.Table = DefaultFCTable
	}
	if !nftNameRe.MatchString(n.Table) {
		return top("table", "invalid nftables table name %q (a letter, then letters, digits or _)", n.Table)
	}
	if n.AutoProvisionHost == nil {
		t := true
		n.AutoProvisionHost = &t
	}
	for _, e := range c.Scalers {
		if e.usesBridge() {
			e.Network = n
		}
	}
	return nil
}

// validateFirecracker checks the firecracker fields of entry e (path p):
// required on firecracker scalers, refused on the others.
func (e *Entry) validateFirecracker(p string) error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{File: e.file, Field: p + field, Msg: fmt.Sprintf(format, a...)}
	}
	f := &e.FirecrackerEntry
	if e.Type != TypeFirecracker {
		for _, c := range []struct {
			field string
			set   bool
		}{{"firecrackerPath", f.FirecrackerPath != ""}, {"jailerPath", f.JailerPath != ""}, {"kernelPath", f.KernelPath != ""},
			{"uid", f.UID != nil}, {"gid", f.GID != nil}, {"chrootBaseDir", f.ChrootBaseDir != ""},
			{"vcpuCount", f.VcpuCount != 0}, {"memSizeMib", f.MemSizeMib != 0}} {
			if c.set {
				return bad("."+c.field, "applies to firecracker scalers only")
			}
		}
		for j, ls := range e.LabelSets {
			if ls == nil {
				continue
			}
			if ls.RootfsPath != "" {
				return bad(fmt.Sprintf(".labelSets[%d].rootfsPath", j), "applies to firecracker scalers only")
			}
			if ls.FirecrackerLabelSet.KernelPath != "" {
				return bad(fmt.Sprintf(".labelSets[%d].kernelPath", j), "applies to firecracker scalers only")
			}
		}
		return nil
	}
	for _, c := range [][2]string{{"firecrackerPath", f.FirecrackerPath}, {"jailerPath", f.JailerPath}, {"kernelPath", f.KernelPath}} {
		if c[1] == "" {
			return bad("."+c[0], "required for firecracker scalers")
		}
		if !filepath.IsAbs(c[1]) {
			return bad("."+c[0], "must be an absolute path")
		}
	}
	if !strings.Contains(filepath.Base(f.FirecrackerPath), "firecracker") {
		return bad(".firecrackerPath", "the file name must contain \"firecracker\" (the jailer refuses other names)")
	}
	if f.UID == nil || *f.UID < 0 {
		return bad(".uid", "required for firecracker scalers: a non-negative user id")
	}
	if f.GID == nil || *f.GID < 0 {
		return bad(".gid", "required for firecracker scalers: a non-negative group id")
	}
	if f.ChrootBaseDir == "" {
		f.ChrootBaseDir = DefaultChrootBaseDir
	}
	if !filepath.IsAbs(f.ChrootBaseDir) {
		return bad(".chrootBaseDir", "must be an absolute path")
	}
	// The API socket <chrootBaseDir>/<fc>/<agent id>/root/run/… must fit a
	// unix socket address (108 bytes with its NUL).
	if l := len(filepath.Join(f.ChrootBaseDir, filepath.Base(f.FirecrackerPath), "scaler-firecracker-00000000", "root", JailAPISock)); l > 107 {
		return bad(".chrootBaseDir", "too long: the VMs' API socket paths would be %d bytes, over the 107 a unix socket allows", l)
	}
	if err := f.validateVMSize(); err != nil {
		return bad(err.field, "%s", err.msg)
	}
	for j, ls := range e.LabelSets {
		if ls == nil {
			continue
		}
		lp := fmt.Sprintf(".labelSets[%d]", j)
		if ls.Image != "" || ls.ImagePullPolicy != "" {
			return bad(lp+".image", "applies to container scalers only")
		}
		if ls.BinaryPath != "" {
			return bad(lp+".binaryPath", "applies to bare-metal scalers only")
		}
		if ls.RootfsPath == "" {
			return bad(lp+".rootfsPath", "required for firecracker scalers")
		}
		if !filepath.IsAbs(ls.RootfsPath) {
			return bad(lp+".rootfsPath", "must be an absolute path")
		}
		if k := ls.FirecrackerLabelSet.KernelPath; k != "" && !filepath.IsAbs(k) {
			return bad(lp+".kernelPath", "must be an absolute path")
		}
		if ls.Resources != nil && ls.Resources.CPUs != nil && *ls.Resources.CPUs > 32 {
			return bad(lp+".resources.cpus", "a microVM has at most 32 vCPUs")
		}
	}
	return nil
}

// FirecrackerImmutableChanged reports whether a reload from a to b changes
// firecracker settings a running backend cannot take (its jail layout, ids
// and network).
func FirecrackerImmutableChanged(a, b *Entry) bool {
	if a.Type != TypeFirecracker || b.Type != TypeFirecracker {
		return false
	}
	fa, fb := a.FirecrackerEntry, b.FirecrackerEntry
	if fa.ChrootBaseDir != fb.ChrootBaseDir || filepath.Base(fa.FirecrackerPath) != filepath.Base(fb.FirecrackerPath) ||
		*fa.UID != *fb.UID || *fa.GID != *fb.GID {
		return true
	}
	na, nb := fa.Network, fb.Network
	return na.CIDR != nb.CIDR || na.Gateway != nb.Gateway || na.BridgeName != nb.BridgeName || na.Table != nb.Table ||
		*na.AutoProvisionHost != *nb.AutoProvisionHost
}

// Prefix is the validated cidr (set by Load/Parse).
func (n *FirecrackerNetwork) Prefix() netip.Prefix { return n.prefix }

// GatewayAddr is the validated gateway address (set by Load/Parse).
func (n *FirecrackerNetwork) GatewayAddr() netip.Addr { return n.gw }

// LastAddr is the last (broadcast) address of the IPv4 prefix p.
func LastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1 << (32 - p.Bits())) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// sizeError is a VM size field that is out of range.
type sizeError struct{ field, msg string }

// validateVMSize defaults and checks vcpuCount and memSizeMib, shared by
// firecracker and qemu scalers; nil when both hold.
func (f *FirecrackerEntry) validateVMSize() *sizeError {
	if f.VcpuCount == 0 {
		f.VcpuCount = DefaultVcpuCount
	}
	if f.VcpuCount < 1 || f.VcpuCount > 32 {
		return &sizeError{".vcpuCount", "must be between 1 and 32"}
	}
	if f.MemSizeMib == 0 {
		f.MemSizeMib = DefaultMemSizeMib
	}
	if f.MemSizeMib < 128 {
		return &sizeError{".memSizeMib", "must be at least 128"}
	}
	return nil
}
