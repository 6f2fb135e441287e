package scaler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cavaliergopher/cpio"

	"kici.dev/kici/internal/scaler/scalerconfig"

	"kici.dev/kici/internal/vmguest"
)

// vmForward is one host port a guest may reach: the guest dials
// 127.0.0.1:GuestPort, QEMU hands the connection to the relay command,
// which dials Target on the host.
type vmForward struct {
	GuestPort int
	Target    string // host:port as the host dials it
}

// bootConfig is the guest's boot configuration for req and the forwards
// QEMU must set up: the orchestrator's port (its URL's host and port, the
// guest resolving that name to its own relay) and the entry's hostPorts.
func (q *QEMU) bootConfig(req *SpawnRequest) (*vmguest.Config, []vmForward, error) {
	u, err := url.Parse(req.OrchestratorURL)
	if err != nil || u.Hostname() == "" {
		return nil, nil, fmt.Errorf("orchestrator URL %q: want ws://host:port", req.OrchestratorURL)
	}
	port, err := orchestratorPort(req.OrchestratorURL)
	if err != nil {
		return nil, nil, err
	}
	cfg := &vmguest.Config{Hostname: req.AgentID}
	env := agentVars(req, q.opts.Environ)
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.IsLoopback() {
			// An address the guest has no route to: the guest dials its
			// own relay at 127.0.0.1 instead.
			guestURL := *u
			guestURL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			for i, kv := range env {
				if strings.HasPrefix(kv, "KICI_ORCHESTRATOR_URL=") {
					env[i] = "KICI_ORCHESTRATOR_URL=" + guestURL.String()
				}
			}
		}
	} else {
		cfg.Hosts = append(cfg.Hosts, host)
	}
	cfg.Env = env
	fwds := []vmForward{{GuestPort: port, Target: net.JoinHostPort(host, strconv.Itoa(port))}}
	for _, p := range q.entry.HostPorts {
		if p != port {
			fwds = append(fwds, vmForward{GuestPort: p, Target: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))})
		}
	}
	for _, f := range fwds {
		cfg.Forwards = append(cfg.Forwards, net.JoinHostPort("127.0.0.1", strconv.Itoa(f.GuestPort)))
	}
	return cfg, fwds, nil
}

// writeVMInitramfs writes dst (0600, owned by uid:gid, the user QEMU runs
// as): the guest image's initramfs base followed by a segment holding
// vmguest.ConfigPath. The kernel unpacks both in order; the guest's init
// reads the configuration and deletes it before the agent starts.
func writeVMInitramfs(base, dst string, cfg *vmguest.Config, uid, gid int) error {
	in, err := os.Open(base)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := out.Chown(uid, gid); err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	if err != nil {
		return err
	}
	// Each cpio archive the kernel unpacks starts on a 4-byte boundary.
	if pad := (4 - n%4) % 4; pad > 0 {
		if _, err := out.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	doc, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	w := cpio.NewWriter(out)
	dir := strings.TrimPrefix(filepath.Dir(vmguest.ConfigPath), "/")
	if err := w.WriteHeader(&cpio.Header{Name: dir, Mode: cpio.TypeDir | 0o755}); err != nil {
		return err
	}
	if err := w.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(vmguest.ConfigPath, "/"), Mode: cpio.TypeReg | 0o600, Size: int64(len(doc))}); err != nil {
		return err
	}
	if _, err := w.Write(doc); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Close()
}

// qemuSpec is one QEMU invocation.
type qemuSpec struct {
	id, machine             string
	accel                   scalerconfig.Accel
	vcpus, memMib           int
	kernel, initrd, console string
	probe                   bool
	tap, mac                string // the TAP on the bridge and the guest's MAC (network: tap), else QEMU's user network
	relay                   []string
	forwards                []vmForward
}

// qemuArgs is QEMU's command line for s: no devices but a serial console
// into a file and one virtio network card on user-mode networking that is
// restricted (no route to the host or beyond) but for the forwards.
func qemuArgs(s qemuSpec) []string {
	// Under software emulation on a busy host the guest kernel's TSC
	// calibration can fail and its boot then hang (seen here about one
	// boot in six with three VMs booting at once); fixed calibration
	// values skip it. A guest clock that runs off is harmless: jobs take
	// their times from the orchestrator.
	// reboot=t makes the guest's restart a triple fault, which QEMU with
	// -no-reboot turns into its exit on every machine type; the kernel's
	// default restart methods (ACPI, keyboard controller, BIOS) were seen
	// to leave a software-emulated guest spinning after "Restarting system".
	cmdline := "console=ttyS0 quiet panic=-1 reboot=t tsc_early_khz=2000000 lpj=4000000 no_timer_check"
	if s.probe {
		cmdline += " " + vmguest.ProbeArg
	}
	machine := s.machine + ",accel=" + string(s.accel)
	args := []string{"-name", s.id, "-M", machine, "-m", strconv.Itoa(s.memMib), "-smp", strconv.Itoa(s.vcpus),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-serial", "file:" + s.console, "-kernel", s.kernel, "-initrd", s.initrd, "-append", cmdline}
	if s.accel == AccelKVM {
		// -cpu host fails on nested hosts that hide this MSR from guests.
		args = append(args, "-cpu", "host,-arch-capabilities")
	}
	if s.probe {
		return args
	}
	netdev := "user,id=n0,restrict=on"
	for _, f := range s.forwards {
		cmd := strings.Join(append(append([]string(nil), s.relay...), f.Target), " ")
		netdev += fmt.Sprintf(",guestfwd=tcp:%s:%d-cmd:%s", vmguest.ForwardAddr, f.GuestPort, strings.ReplaceAll(cmd, ",", ",,"))
	}
	dev := ",netdev=n0"
	if s.tap != "" {
		netdev = "tap,id=n0,ifname=" + s.tap + ",script=no,downscript=no"
		dev += ",mac=" + s.mac
	}
	nic := "virtio-net-device"
	if s.machine == "pc" {
		nic = "virtio-net-pci"
	}
	return append(args, "-netdev", netdev, "-device", nic+dev)
}

// runProbe decides the acceleration: KVM when configured or (auto) when a
// boot with it reaches the guest's init, else TCG; a TCG boot that fails
// too degrades the backend.
func (q *QEMU) runProbe() {
	defer close(q.probeDone)
	e := q.entry
	try := func(accel scalerconfig.Accel) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), q.opts.ProbeTimeout)
		defer cancel()
		return q.probeBoot(ctx, accel)
	}
	var kvmErr error
	if e.Accel != AccelTCG {
		d, err := try(AccelKVM)
		if err == nil {
			q.probe = ProbeResult{Accel: AccelKVM, BootTime: d}
			q.log.Info("VMs use KVM", "bootTime", d.Round(time.Millisecond))
			return
		}
		kvmErr = err
		if e.Accel == AccelKVM {
			q.probe = ProbeResult{Accel: AccelKVM, Err: fmt.Errorf("accel kvm: %w", err)}
			q.log.Error("qemu scaler degraded: a KVM boot failed and accel is kvm", "err", err)
			return
		}
	}
	d, err := try(AccelTCG)
	if err != nil {
		q.probe = ProbeResult{Accel: AccelTCG, Err: fmt.Errorf("a probe boot failed: %w", err)}
		q.log.Error("qemu scaler degraded: its guest image does not boot", "err", err)
		return
	}
	q.probe = ProbeResult{Accel: AccelTCG, BootTime: d}
	if kvmErr != nil {
		q.probe.KVMError = kvmErr.Error()
		q.log.Warn("VMS RUN UNDER SOFTWARE EMULATION (TCG): KVM is not usable here; jobs start and run much slower",
			"kvm", kvmErr, "bootTime", d.Round(time.Millisecond))
	} else {
		q.log.Info("VMs use TCG (accel: tcg)", "bootTime", d.Round(time.Millisecond))
	}
}

// Accelerations, as QEMUEntry.Accel names them.
const (
	AccelAuto = scalerconfig.AccelAuto
	AccelKVM  = scalerconfig.AccelKVM
	AccelTCG  = scalerconfig.AccelTCG
)

// probeBoot boots the guest image with accel and the probe argument and
// returns how long until QEMU ended with the init's ProbeOK on the console.
func (q *QEMU) probeBoot(ctx context.Context, accel scalerconfig.Accel) (time.Duration, error) {
	e := q.entry
	if accel == AccelKVM {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return 0, fmt.Errorf("/dev/kvm: %w", err)
		}
		f.Close()
	}
	dir, err := os.MkdirTemp(e.VMDir, ".probe-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chown(dir, *e.UID, *e.GID); err != nil {
		return 0, err
	}
	console := filepath.Join(dir, "console.log")
	args := qemuArgs(qemuSpec{id: "probe-" + q.name, machine: e.Machine, accel: accel, vcpus: 1, memMib: 256,
		kernel: e.KernelPath, initrd: e.InitrdPath, console: console, probe: true})
	cmd := exec.CommandContext(ctx, e.QEMUPath, args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(*e.UID), Gid: uint32(*e.GID), Groups: []uint32{}}}
	}
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		return 0, fmt.Errorf("the guest did not reach its init within %s (console: %s)", q.opts.ProbeTimeout, consoleTail(console, 3))
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %v: %s", e.QEMUPath, err, strings.TrimSpace(stderr.String()))
	}
	if b, _ := os.ReadFile(console); !bytes.Contains(b, []byte(vmguest.ProbeOK)) {
		return 0, fmt.Errorf("the guest did not reach kici-vm-init (is initrdPath built by make vm-image?); console: %s", consoleTail(console, 3))
	}
	return took, nil
}

// consoleTail is the last n non-empty lines of a VM's console log, joined
// by " | " (for errors and job logs).
func consoleTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no console output)"
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "(no console output)"
	}
	return strings.Join(lines, " | ")
}

// RelayArg is the hidden argument of kici-orchestrator that runs Relay:
// QEMU starts `kici-orchestrator __kici-vm-relay <host:port>` for each
// connection a guest makes to a forwarded port.
const RelayArg = "__kici-vm-relay"

// Relay copies stdin to a TCP connection to target and the connection to
// stdout, until both directions end. It returns an exit code.
func Relay(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: kici-orchestrator "+RelayArg+" <host:port> (run by QEMU for a job VM's forwarded port)")
		return 2
	}
	c, err := net.DialTimeout("tcp", args[0], 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, os.Stdin)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- err
	}()
	_, err = io.Copy(os.Stdout, c)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return 1
	}
	return 0
}
