package scaler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/vmguest"
)

// QEMUOptions configure qemu backends.
type QEMUOptions struct {
	// RelayCommand is the host program QEMU runs for each guest connection
	// to a forwarded port, with "<host>:<port>" appended: it must copy its
	// stdin to that address and the answers to its stdout. Default: this
	// binary with RelayArg (kici-orchestrator serves it).
	RelayCommand []string
	// StopGrace is how long Destroy waits after SIGTERM before SIGKILL
	// (default 5 s).
	StopGrace time.Duration
	// ProbeTimeout bounds each boot of the start-up probe (default 60 s: a
	// TCG boot takes about 5 s on two cores).
	ProbeTimeout time.Duration
	// Environ is the environment whose KICI_AGENT_ENV_* values are
	// forwarded to agents (default os.Environ()).
	Environ []string
	// Networks is the bridges' host side, shared with the firecracker
	// scalers, for qemu scalers with network: tap (default: one of this
	// factory's own over Runner).
	Networks *VMNetworks
	// Runner runs ip/nft/sysctl when Networks is not set (default
	// ExecRunner).
	Runner HostRunner
	// Logger logs spawns, exits, probes and sweeps.
	Logger *slog.Logger
}

// WithQEMU wraps next so that qemu entries get a QEMU backend; other types
// go to next.
func WithQEMU(next BackendFactory, o QEMUOptions) BackendFactory {
	if o.Networks == nil {
		o.Networks = NewVMNetworks(o.Runner)
	}
	return func(e *Entry, exited func(agentID string, err error)) (Backend, error) {
		if e.Type != TypeQEMU {
			return next(e, exited)
		}
		return NewQEMU(e, o, exited)
	}
}

// QEMU runs each agent in a virtual machine of its own started through
// QEMU: Debian's kernel, the guest image's initramfs held in guest memory
// (nothing of one job's VM survives it), user-mode networking restricted
// so the guest reaches only the orchestrator's port and the entry's
// hostPorts, and the agent's one-session token in a per-VM initramfs
// segment the guest's init deletes before the agent starts. The
// acceleration is KVM when a probe boot with it reaches the guest's init,
// else TCG (software emulation, loudly logged); until the probe ends,
// spawns wait for it. A host where no probe boot succeeds makes the
// backend degraded with the reason.
type QEMU struct {
	name   string
	entry  *Entry
	opts   QEMUOptions
	exited func(agentID string, err error)
	log    *slog.Logger

	probeDone chan struct{}
	probe     ProbeResult
	host      *fcHost // the bridge's host side (network: tap), else nil

	mu     sync.Mutex
	vms    map[string]*qemuVM
	closed bool
}

// ProbeResult is what the start-up boot probe found.
type ProbeResult struct {
	// Accel is the acceleration spawns use: kvm or tcg.
	Accel scalerconfig.Accel `json:"accel"`
	// BootTime is how long the probe's boot took from QEMU's start to the
	// guest's init.
	BootTime time.Duration `json:"bootTimeNs"`
	// KVMError says why KVM was not used (auto), empty when it was.
	KVMError string `json:"kvmError,omitempty"`
	// Err is set when no boot succeeded: the backend is degraded.
	Err error `json:"-"`
}

type qemuVM struct {
	id, dir    string
	tap, tag   string     // network: tap only
	ip         netip.Addr // network: tap only
	cmd        *exec.Cmd
	done       chan struct{}
	destroying bool
}

// NewQEMU builds the backend of entry e, removes what a previous
// orchestrator left of this scaler's VMs and starts the boot probe.
func NewQEMU(e *Entry, o QEMUOptions, exited func(string, error)) (*QEMU, error) {
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(o.RelayCommand) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("qemu scaler: finding this binary for the port relay: %w", err)
		}
		o.RelayCommand = []string{self, RelayArg}
	}
	q := &QEMU{name: e.Name, entry: e, opts: o, exited: exited, log: o.Logger.With("scaler", e.Name),
		probeDone: make(chan struct{}), vms: map[string]*qemuVM{}}
	if err := os.MkdirAll(e.VMDir, 0o711); err != nil {
		return nil, fmt.Errorf("qemu scaler %s: vmDir: %w", e.Name, err)
	}
	if e.GuestNetwork == scalerconfig.NetworkTap {
		nets := o.Networks
		if nets == nil {
			nets = NewVMNetworks(o.Runner)
		}
		h, err := nets.host(e.Network)
		if err != nil {
			return nil, fmt.Errorf("qemu scaler %s: %w", e.Name, err)
		}
		q.host = h
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = h.EnsureHostReady(ctx)
		cancel()
		if err != nil {
			q.log.Error("bridge network not ready; this scaler is degraded until a reload succeeds", "err", err)
		}
	}
	if n, err := q.ReapOrphans(context.Background()); err != nil {
		q.log.Warn("removing what a previous orchestrator left", "err", err)
	} else if n > 0 {
		q.log.Info("removed VMs a previous orchestrator left", "count", n)
	}
	go q.runProbe()
	return q, nil
}

// HostError is why the backend cannot spawn (no boot succeeded, or the
// bridge of a network: tap scaler is not ready), nil when it can or while
// the probe runs.
func (q *QEMU) HostError() error {
	if err := q.bridgeError(); err != nil {
		return err
	}
	select {
	case <-q.probeDone:
		return q.probe.Err
	default:
		return nil
	}
}

// Probe waits for the start-up probe (bounded by ctx) and returns it.
func (q *QEMU) Probe(ctx context.Context) (ProbeResult, error) {
	select {
	case <-q.probeDone:
		return q.probe, nil
	case <-ctx.Done():
		return ProbeResult{}, ctx.Err()
	}
}

// AccelStatus is the boot probe's outcome as `kici-admin scaler list`
// shows it: probing until it ends, then the acceleration the VMs use
// (forced-tcg when the configuration asks for TCG) with the probe boot's
// duration, or none when no boot succeeded.
func (q *QEMU) AccelStatus() AccelStatus {
	select {
	case <-q.probeDone:
	default:
		return AccelStatus{Accel: AccelProbing}
	}
	p := q.probe
	switch {
	case p.Err != nil:
		return AccelStatus{Accel: AccelNone, Note: p.Err.Error()}
	case p.Accel == AccelTCG && q.entry.Accel == AccelTCG:
		return AccelStatus{Accel: AccelForcedTCG, BootTime: p.BootTime}
	}
	return AccelStatus{Accel: AccelState(p.Accel), BootTime: p.BootTime, Note: p.KVMError}
}

// Spawn writes the VM's directory and initramfs and starts QEMU; it
// returns once QEMU runs (the guest boots and its agent dials in on its
// own). On failure nothing of the VM remains.
func (q *QEMU) Spawn(ctx context.Context, req *SpawnRequest) error {
	probe, err := q.Probe(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the VM boot probe: %w", err)
	}
	if probe.Err != nil {
		return fmt.Errorf("qemu host not ready: %w", probe.Err)
	}
	if err := q.bridgeError(); err != nil {
		return err
	}
	v := &qemuVM{id: req.AgentID, dir: filepath.Join(q.entry.VMDir, req.AgentID), done: make(chan struct{})}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return errors.New("backend is shutting down")
	}
	if _, dup := q.vms[v.id]; dup {
		q.mu.Unlock()
		return fmt.Errorf("VM %s already exists", v.id)
	}
	q.vms[v.id] = v
	q.mu.Unlock()
	if err := q.start(ctx, req, v, probe.Accel); err != nil {
		if v.cmd != nil && v.cmd.Process != nil {
			_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
			_ = v.cmd.Wait()
		}
		_ = os.RemoveAll(v.dir)
		q.teardownTap(v)
		q.mu.Lock()
		delete(q.vms, v.id)
		q.mu.Unlock()
		close(v.done)
		return err
	}
	go q.watch(v)
	return nil
}

func (q *QEMU) start(ctx context.Context, req *SpawnRequest, v *qemuVM, accel scalerconfig.Accel) error {
	e := req.Entry
	var boot *vmguest.Config
	var fwds []vmForward
	var err error
	if q.host != nil {
		boot, err = q.tapBootConfig(ctx, req, v)
	} else {
		boot, fwds, err = q.bootConfig(req)
	}
	if err != nil {
		return err
	}
	if err := os.Mkdir(v.dir, 0o700); err != nil {
		return fmt.Errorf("VM directory: %w", err)
	}
	if err := os.Chown(v.dir, *e.UID, *e.GID); err != nil {
		return fmt.Errorf("VM directory: %w", err)
	}
	initrd := filepath.Join(v.dir, "initramfs.cpio")
	if err := writeVMInitramfs(e.InitrdPath, initrd, boot, *e.UID, *e.GID); err != nil {
		return fmt.Errorf("VM initramfs: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	kernel := e.KernelPath
	if req.LabelSet.FirecrackerLabelSet.KernelPath != "" {
		kernel = req.LabelSet.FirecrackerLabelSet.KernelPath
	}
	vcpus, mem := vmSize(e, req.Limits)
	args := qemuArgs(qemuSpec{id: v.id, machine: e.Machine, accel: accel, vcpus: vcpus, memMib: mem, kernel: kernel,
		initrd: initrd, console: filepath.Join(v.dir, "console.log"), relay: q.opts.RelayCommand, forwards: fwds, tap: v.tap, mac: macOf(v)})
	v.cmd = exec.Command(e.QEMUPath, args...)
	v.cmd.Dir = v.dir
	v.cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		v.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(*e.UID), Gid: uint32(*e.GID), Groups: []uint32{}}
	}
	if err := v.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", e.QEMUPath, err)
	}
	ipText := ""
	if v.ip.IsValid() {
		ipText = v.ip.String()
	}
	rec, _ := json.Marshal(vmRecord{Scaler: q.name, AgentID: v.id, Pid: v.cmd.Process.Pid, IP: ipText, Tap: v.tap})
	if err := os.WriteFile(filepath.Join(v.dir, vmRecordFile), rec, 0o600); err != nil {
		return fmt.Errorf("VM record: %w", err)
	}
	q.log.Info("VM started", "agent", v.id, "job", req.JobID, "pid", v.cmd.Process.Pid, "accel", accel)
	req.Emit(EventProvisioning, fmt.Sprintf("VM %s booting (QEMU %s, %s, %d vCPU, %d MiB)", v.id, e.Machine, accel, vcpus, mem))
	return nil
}

// watch waits for QEMU to end (the guest powered off when its agent ended,
// Destroy, or a kill), removes the VM's directory and reports the end.
func (q *QEMU) watch(v *qemuVM) {
	err := v.cmd.Wait()
	console := consoleTail(filepath.Join(v.dir, "console.log"), 5)
	if rmErr := os.RemoveAll(v.dir); rmErr != nil {
		q.log.Warn("remove VM directory", "agent", v.id, "err", rmErr)
	}
	q.teardownTap(v)
	q.mu.Lock()
	delete(q.vms, v.id)
	destroying := v.destroying
	q.mu.Unlock()
	if destroying {
		err = nil
	} else if err != nil {
		err = fmt.Errorf("VM ended: QEMU %w; the guest's console ended with: %s", err, console)
	}
	q.log.Info("VM ended", "agent", v.id, "err", err, "console", console)
	if q.exited != nil {
		q.exited(v.id, err)
	}
	close(v.done)
}

// Destroy stops VM id: SIGTERM to QEMU (and the port relays it started),
// SIGKILL after StopGrace; it waits (bounded by ctx) until the VM is gone
// and its directory removed. Unknown ids are ignored.
func (q *QEMU) Destroy(ctx context.Context, id string) error {
	q.mu.Lock()
	v := q.vms[id]
	if v == nil {
		q.mu.Unlock()
		return nil
	}
	v.destroying = true
	q.mu.Unlock()
	if v.cmd == nil || v.cmd.Process == nil {
		return waitEnded(ctx, v.done) // a spawn in flight: its unwinding removes it
	}
	pgid := v.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-v.done:
		return nil
	case <-time.After(q.opts.StopGrace):
	case <-ctx.Done():
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return waitEnded(ctx, v.done)
}

// Shutdown refuses further spawns and destroys every VM (bounded by ctx).
func (q *QEMU) Shutdown(ctx context.Context) {
	q.mu.Lock()
	q.closed = true
	ids := slices.Collect(maps.Keys(q.vms))
	q.mu.Unlock()
	destroyAll(ctx, ids, q.Destroy)
}

// ReapOrphans kills the QEMU processes of this scaler's VMs it does not
// track (left by an orchestrator that was killed) and removes their
// directories and, on the bridge network, their TAPs and nftables rules
// (after retrying the bridge's readiness check when it failed: the
// Manager calls ReapOrphans on reload). It returns how many leftovers it
// removed.
func (q *QEMU) ReapOrphans(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(q.entry.VMDir)
	if err != nil {
		return 0, fmt.Errorf("vmDir: %w", err)
	}
	n := 0
	for _, d := range ents {
		dir := filepath.Join(q.entry.VMDir, d.Name())
		b, err := os.ReadFile(filepath.Join(dir, vmRecordFile))
		var r vmRecord
		if err != nil || json.Unmarshal(b, &r) != nil || r.Scaler != q.name || r.AgentID != d.Name() {
			continue
		}
		q.mu.Lock()
		_, tracked := q.vms[r.AgentID]
		q.mu.Unlock()
		if tracked {
			continue
		}
		if pidAlive(r.Pid, r.AgentID) {
			_ = syscall.Kill(-r.Pid, syscall.SIGKILL)
			_ = syscall.Kill(r.Pid, syscall.SIGKILL)
		}
		if err := os.RemoveAll(dir); err == nil {
			n++
		}
	}
	if q.host == nil {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := q.host.EnsureHostReady(ctx); err != nil {
		return n, fmt.Errorf("bridge network not ready: %w", err)
	}
	m, err := q.host.reapTagged(ctx, q.name, func(id string) bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		_, ok := q.vms[id]
		return ok
	})
	return n + m, err
}

// bridgeError is why the bridge network of a network: tap scaler is not
// ready (nil when it is, or on QEMU's user network). A reload retries it
// (ReapOrphans).
func (q *QEMU) bridgeError() error {
	if q.host == nil {
		return nil
	}
	q.host.mu.Lock()
	defer q.host.mu.Unlock()
	if q.host.ready {
		return nil
	}
	return fmt.Errorf("bridge network not ready: %w", q.host.readyE)
}
