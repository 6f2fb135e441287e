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
	"path/filepath"
	"slices"
	"sync"
	"time"

	"kici.dev/kici/internal/scaler/fcapi"
	"kici.dev/kici/internal/scaler/scalerconfig"
)

// Paths inside a VM's jail (the root the jailed firecracker sees).
const (
	jailKernel  = "/vmlinux"
	jailRootfs  = "/rootfs.ext4"
	jailAPISock = scalerconfig.JailAPISock
	// vmRecordFile, next to the jail's root/, tags the jail with its
	// scaler and records the VM (orphan sweep, allocator rebuild).
	vmRecordFile = "kici-vm.json"
	// MMDSAddress is where the guest reads its metadata (KiCI).
	MMDSAddress = "169.254.169.254"
	// mmdsEnvBudget caps the summed size of kici-env (32 768 bytes, as in KiCI).
	mmdsEnvBudget = 32768
)

// FirecrackerOptions configure firecracker backends.
type FirecrackerOptions struct {
	// Runner runs ip/nft/sysctl (default ExecRunner); unused when
	// Networks is set (its runner applies).
	Runner HostRunner
	// Networks is the bridges' host side shared with qemu scalers on the
	// bridge network (default: one of this factory's own).
	Networks *VMNetworks
	// Launcher starts the jailer (default ExecLauncher).
	Launcher VMMLauncher
	// StopGrace is how long Destroy waits after SendCtrlAltDel before it
	// kills the process group (default 5 s, KiCI).
	StopGrace time.Duration
	// SocketWait bounds the wait for the API socket to answer (default
	// 5 s, KiCI); the spawn deadline also applies.
	SocketWait time.Duration
	// SweepInterval is the periodic orphan sweep (default 15 min, KiCI).
	SweepInterval time.Duration
	// Environ is the environment whose KICI_AGENT_ENV_* values are
	// forwarded to agents (default os.Environ()).
	Environ []string
	// Logger logs spawns, exits and sweeps.
	Logger *slog.Logger
}

// WithFirecracker wraps next so that firecracker entries get a Firecracker
// backend; the scalers of one bridge share its host side (nftables table,
// IP allocator), and a later entry whose firecracker: block differs for
// that bridge is refused. Other types go to next.
func WithFirecracker(next BackendFactory, o FirecrackerOptions) BackendFactory {
	nets := o.Networks
	if nets == nil {
		nets = NewVMNetworks(o.Runner)
	}
	return func(e *Entry, exited func(agentID string, err error)) (Backend, error) {
		if e.Type != TypeFirecracker {
			return next(e, exited)
		}
		h, err := nets.host(e.Network)
		if err != nil {
			return nil, err
		}
		return newFirecracker(e, h, o, exited), nil
	}
}

// Firecracker runs each agent in a Firecracker microVM started through the
// jailer (KiCI firecracker backend): a TAP on the shared bridge as an
// isolated port, an address from the subnet, one nftables rule letting it
// reach the orchestrator port on the host (everything else from the bridge
// to the host, and between VMs, is dropped by the table's baseline), the
// agent's configuration in MMDS, kernel and rootfs linked into the jail.
// If the host is not ready (EnsureHostReady failed), the backend is
// degraded: its spawns fail with that error, other scalers are unaffected,
// and the check is retried on reload.
type Firecracker struct {
	name   string
	host   *fcHost
	opts   FirecrackerOptions
	exited func(agentID string, err error)
	log    *slog.Logger
	base   string // <chrootBaseDir>/<basename firecrackerPath>
	uid    int
	gid    int

	mu     sync.Mutex
	vms    map[string]*fcVM
	closed bool
	stop   chan struct{}

	sweepMu sync.Mutex
}

type fcVM struct {
	id, tap, tag, dir string
	ip                netip.Addr
	proc              VMMProcess
	api               *fcapi.Client
	running           bool
	destroying        bool
	done              chan struct{}
}

// vmRecord is kici-vm.json.
type vmRecord struct {
	Scaler  string `json:"scaler"`
	AgentID string `json:"agentId"`
	IP      string `json:"ip"`
	Tap     string `json:"tap"`
	Pid     int    `json:"pid,omitempty"`
}

func newFirecracker(e *Entry, h *fcHost, o FirecrackerOptions, exited func(string, error)) *Firecracker {
	if o.Launcher == nil {
		o.Launcher = ExecLauncher{}
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.SocketWait <= 0 {
		o.SocketWait = 5 * time.Second
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = 15 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Firecracker{name: e.Name, host: h, opts: o, exited: exited, log: o.Logger.With("scaler", e.Name),
		base: filepath.Join(e.ChrootBaseDir, filepath.Base(e.FirecrackerPath)), uid: *e.UID, gid: *e.GID,
		vms: map[string]*fcVM{}, stop: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f.adoptOthers()
	if err := h.EnsureHostReady(ctx); err != nil {
		f.log.Error("firecracker host not ready; this scaler is degraded until a reload succeeds", "err", err)
	} else if n, err := f.ReapOrphans(ctx); err != nil {
		f.log.Warn("firecracker orphan sweep", "err", err)
	} else if n > 0 {
		f.log.Info("removed firecracker leftovers", "count", n)
	}
	go f.sweepLoop()
	return f
}

// HostError is the EnsureHostReady failure degrading this backend (nil
// when the host is ready).
func (f *Firecracker) HostError() error {
	f.host.mu.Lock()
	defer f.host.mu.Unlock()
	if f.host.ready {
		return nil
	}
	return f.host.readyE
}

// Spawn allocates an address, creates the TAP and the VM's nft rule,
// builds the jail, launches the jailer, configures the VM through the API
// and starts it. ctx (the spawn deadline) cancels every step; on any
// failure everything created is removed and the address released.
func (f *Firecracker) Spawn(ctx context.Context, req *SpawnRequest) error {
	if err := f.HostError(); err != nil {
		return fmt.Errorf("firecracker host not ready: %w", err)
	}
	e := req.Entry
	port, err := orchestratorPort(req.OrchestratorURL)
	if err != nil {
		return err
	}
	md, err := f.metadata(req)
	if err != nil {
		return err
	}
	v := &fcVM{id: req.AgentID, tap: tapName(req.AgentID), tag: vmTag(f.name, req.AgentID),
		dir: filepath.Join(f.base, req.AgentID), done: make(chan struct{})}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errors.New("backend is shutting down")
	}
	if _, dup := f.vms[v.id]; dup {
		f.mu.Unlock()
		return fmt.Errorf("VM %s already exists", v.id)
	}
	// Tracked before anything exists on the host: the sweep never takes it.
	f.vms[v.id] = v
	f.mu.Unlock()
	if err := f.start(ctx, req, e, v, port, md); err != nil {
		f.teardown(v)
		f.mu.Lock()
		delete(f.vms, v.id)
		f.mu.Unlock()
		close(v.done)
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return err
	}
	f.mu.Lock()
	v.running = true
	f.mu.Unlock()
	f.log.Info("microVM started", "agent", v.id, "job", req.JobID, "ip", v.ip, "tap", v.tap)
	go f.watch(v)
	return nil
}

func (f *Firecracker) start(ctx context.Context, req *SpawnRequest, e *Entry, v *fcVM, port int, md map[string]any) error {
	ip, err := f.host.alloc.Allocate(v.id)
	if err != nil {
		return err
	}
	v.ip = ip
	n := f.host.net
	// Addresses and host interfaces stay on the orchestrator's log.
	f.log.Info("microVM network", "agent", v.id, "job", req.JobID, "ip", ip, "tap", v.tap, "bridge", n.BridgeName)
	req.Emit(EventProvisioning, fmt.Sprintf("microVM %s: network attached", v.id))
	if err := f.host.setupTap(ctx, v.tap, v.tag, f.uid, f.gid); err != nil {
		return fmt.Errorf("TAP %s: %w", v.tap, err)
	}
	if err := f.host.allowHost(ctx, ip, port, v.tag); err != nil {
		return fmt.Errorf("nftables rule: %w", err)
	}
	kernel := e.KernelPath
	if req.LabelSet.FirecrackerLabelSet.KernelPath != "" {
		kernel = req.LabelSet.FirecrackerLabelSet.KernelPath
	}
	root := filepath.Join(v.dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	rec, _ := json.Marshal(vmRecord{Scaler: f.name, AgentID: v.id, IP: ip.String(), Tap: v.tap})
	if err := os.WriteFile(filepath.Join(v.dir, vmRecordFile), rec, 0o600); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	for _, p := range [][2]string{{kernel, jailKernel}, {req.LabelSet.RootfsPath, jailRootfs}} {
		if err := linkOrCopy(p[0], filepath.Join(root, p[1]), f.uid, f.gid); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
	}
	if err := os.Chown(filepath.Join(root, "run"), f.uid, f.gid); err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	spec := &JailSpec{JailerPath: e.JailerPath, ExecFile: e.FirecrackerPath, ID: v.id, UID: f.uid, GID: f.gid,
		ChrootBaseDir: e.ChrootBaseDir, APISock: jailAPISock, Console: filepath.Join(v.dir, "console.log")}
	proc, err := f.opts.Launcher.Launch(spec)
	if err != nil {
		return err
	}
	f.mu.Lock()
	v.proc = proc
	f.mu.Unlock()
	rec, _ = json.Marshal(vmRecord{Scaler: f.name, AgentID: v.id, IP: ip.String(), Tap: v.tap, Pid: proc.Pid()})
	_ = os.WriteFile(filepath.Join(v.dir, vmRecordFile), rec, 0o600)
	f.log.Info("jailer started", "agent", v.id, "pid", proc.Pid())
	req.Emit(EventProvisioning, "jailer started, waiting for the microVM's API socket")

	sock := filepath.Join(root, jailAPISock)
	v.api = fcapi.New(sock)
	wctx, cancel := context.WithTimeout(ctx, f.opts.SocketWait)
	err = waitSocket(wctx, sock, proc)
	if err == nil {
		err = v.api.WaitReady(wctx, 20*time.Millisecond)
	}
	cancel()
	if err != nil {
		return err
	}
	vcpus, mem := vmSize(e, req.Limits)
	calls := []func() error{
		func() error {
			return v.api.PutMachineConfig(ctx, fcapi.MachineConfig{VcpuCount: vcpus, MemSizeMib: mem})
		},
		func() error {
			return v.api.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: jailKernel, BootArgs: bootArgs(ip, n.GatewayAddr(), n.Prefix().Bits())})
		},
		func() error {
			return v.api.PutDrive(ctx, fcapi.Drive{DriveID: "rootfs", PathOnHost: jailRootfs, IsRootDevice: true, IsReadOnly: true})
		},
		func() error {
			return v.api.PutNetworkInterface(ctx, fcapi.NetworkInterface{IfaceID: "eth0", HostDevName: v.tap, GuestMAC: guestMAC(ip)})
		},
		func() error {
			return v.api.PutMMDSConfig(ctx, fcapi.MMDSConfig{Version: "V2", NetworkInterfaces: []string{"eth0"}, IPv4Address: MMDSAddress})
		},
		func() error { return v.api.PutMMDS(ctx, md) },
		func() error { return v.api.Action(ctx, fcapi.ActionInstanceStart) },
	}
	for _, c := range calls {
		if err := c(); err != nil {
			return err
		}
	}
	req.Emit(EventProvisioning, fmt.Sprintf("microVM %s booted (%d vCPU, %d MiB)", v.id, vcpus, mem))
	return nil
}

// teardown kills the VM's process group (if launched) and removes its nft
// rule, TAP and jail, and releases its address. Errors are logged; every
// step runs.
func (f *Firecracker) teardown(v *fcVM) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.mu.Lock()
	proc := v.proc
	f.mu.Unlock()
	if proc != nil {
		select {
		case <-proc.Done():
		default:
			_ = proc.Kill()
			select {
			case <-proc.Done():
			case <-time.After(10 * time.Second):
				f.log.Warn("VMM process did not end after SIGKILL", "agent", v.id, "pid", proc.Pid())
			}
		}
	}
	if err := f.host.deleteRules(ctx, v.tag); err != nil {
		f.log.Warn("remove nft rule", "agent", v.id, "err", err)
	}
	if _, err := f.host.run.Run(ctx, "", "ip", "link", "del", "dev", v.tap); err != nil {
		f.log.Debug("remove TAP", "agent", v.id, "err", err)
	}
	if err := os.RemoveAll(v.dir); err != nil {
		f.log.Warn("remove jail", "agent", v.id, "err", err)
	}
	f.host.alloc.Release(v.id)
}

// watch waits for the VMM to end (guest shutdown or Destroy), removes the
// VM and reports the exit.
func (f *Firecracker) watch(v *fcVM) {
	<-v.proc.Done()
	err := v.proc.Err()
	f.teardown(v)
	f.mu.Lock()
	delete(f.vms, v.id)
	destroying := v.destroying
	f.mu.Unlock()
	if destroying {
		err = nil
	} else if err != nil {
		err = fmt.Errorf("microVM ended: %w", err)
	}
	f.log.Info("microVM ended", "agent", v.id, "err", err)
	if f.exited != nil {
		f.exited(v.id, err)
	}
	close(v.done)
}

// Destroy asks the guest to shut down (SendCtrlAltDel), waits StopGrace,
// then kills the jailer/firecracker process group; the TAP, nft rule,
// jail and address are removed once it ended. It waits for that (bounded
// by ctx). Unknown ids are ignored.
func (f *Firecracker) Destroy(ctx context.Context, id string) error {
	f.mu.Lock()
	v := f.vms[id]
	if v == nil {
		f.mu.Unlock()
		return nil
	}
	running := v.running
	v.destroying = true
	f.mu.Unlock()
	if !running {
		// A spawn in flight: its own unwinding removes it.
		return waitEnded(ctx, v.done)
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := v.api.Action(actx, fcapi.ActionSendCtrlAltDel)
	cancel()
	if err != nil {
		f.log.Debug("SendCtrlAltDel", "agent", id, "err", err)
	}
	select {
	case <-v.proc.Done():
	case <-time.After(f.opts.StopGrace):
		_ = v.proc.Kill()
	case <-ctx.Done():
		_ = v.proc.Kill()
	}
	return waitEnded(ctx, v.done)
}

// Shutdown refuses further spawns and destroys every VM (bounded by ctx).
func (f *Firecracker) Shutdown(ctx context.Context) {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.stop)
	}
	ids := slices.Collect(maps.Keys(f.vms))
	f.mu.Unlock()
	destroyAll(ctx, ids, f.Destroy)
}
