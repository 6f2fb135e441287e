package scaler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"kici.dev/kici/internal/scaler/fcapi"
)

// Paths inside a VM's jail (the root the jailed firecracker sees).
const (
	jailKernel  = "/vmlinux"
	jailRootfs  = "/rootfs.ext4"
	jailAPISock = "/run/firecracker.socket"
	// vmRecordFile, next to the jail's root/, tags the jail with its
	// scaler and records the VM (orphan sweep, allocator rebuild).
	vmRecordFile = "kici-vm.json"
	// MMDSAddress is where the guest reads its metadata (KiCI).
	MMDSAddress = "169.254.169.254"
	// mmdsEnvBudget caps the summed size of kici-env (KiCI: 32 768 bytes).
	mmdsEnvBudget = 32768
)

// JailSpec is one jailer invocation.
type JailSpec struct {
	// JailerPath and ExecFile are the jailer and the firecracker binary.
	JailerPath, ExecFile string
	// ID is the VM id (the agent id).
	ID string
	// UID and GID are the ids the jailer drops to.
	UID, GID int
	// ChrootBaseDir is --chroot-base-dir.
	ChrootBaseDir string
	// APISock is the API socket path inside the jail.
	APISock string
	// Console receives the process's stdout and stderr (the serial
	// console), a host path.
	Console string
}

// Argv is the jailer command line (KiCI step 6, without
// --new-pid-ns and --daemonize: the jailer execs firecracker in place, so
// the launched process is the VMM and its process group is the VM's):
// jailer --id ID --exec-file F --uid U --gid G --chroot-base-dir B --
// --api-sock S.
func (s *JailSpec) Argv() []string {
	return []string{s.JailerPath, "--id", s.ID, "--exec-file", s.ExecFile,
		"--uid", strconv.Itoa(s.UID), "--gid", strconv.Itoa(s.GID),
		"--chroot-base-dir", s.ChrootBaseDir, "--", "--api-sock", s.APISock}
}

// VMMProcess is a launched jailer/firecracker process.
type VMMProcess interface {
	// Pid is the process id (leader of its process group).
	Pid() int
	// Done is closed once the process has ended; Err is then its wait error.
	Done() <-chan struct{}
	Err() error
	// Kill sends SIGKILL to the process group.
	Kill() error
}

// VMMLauncher starts jailer processes.
type VMMLauncher interface {
	Launch(spec *JailSpec) (VMMProcess, error)
}

// ExecLauncher runs spec.Argv() with os/exec in a new process group, with
// only PATH in its environment.
type ExecLauncher struct{}

// Launch starts the jailer.
func (ExecLauncher) Launch(spec *JailSpec) (VMMProcess, error) {
	argv := spec.Argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Console != "" {
		f, err := os.OpenFile(spec.Console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start jailer: %w", err)
	}
	p := &execProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

type execProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *execProc) Pid() int              { return p.cmd.Process.Pid }
func (p *execProc) Done() <-chan struct{} { return p.done }
func (p *execProc) Err() error            { <-p.done; return p.err }
func (p *execProc) Kill() error           { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// FirecrackerOptions configure firecracker backends.
type FirecrackerOptions struct {
	// Runner runs ip/nft/sysctl (default ExecRunner).
	Runner HostRunner
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
	var mu sync.Mutex
	hosts := map[string]*fcHost{}
	return func(e *Entry, exited func(agentID string, err error)) (Backend, error) {
		if e.Type != TypeFirecracker {
			return next(e, exited)
		}
		n := e.fcNet
		if n == nil {
			return nil, errors.New("firecracker scaler without a validated firecracker: block")
		}
		mu.Lock()
		h := hosts[n.BridgeName]
		if h != nil && (h.net.CIDR != n.CIDR || h.net.Gateway != n.Gateway || h.net.Table != n.Table ||
			*h.net.AutoProvisionHost != *n.AutoProvisionHost) {
			mu.Unlock()
			return nil, fmt.Errorf("the firecracker: block of bridge %s cannot change while the orchestrator runs (restart to apply it)", n.BridgeName)
		}
		if h == nil {
			run := o.Runner
			if run == nil {
				run = ExecRunner{}
			}
			h = &fcHost{net: n, run: run, alloc: NewIPAllocator(n.prefix, n.gw)}
			hosts[n.BridgeName] = h
		}
		mu.Unlock()
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

// adoptOthers reserves the addresses of live VMs of other scalers found in
// the jail directory (rebuilding the allocator after a restart).
func (f *Firecracker) adoptOthers() {
	for _, r := range f.records() {
		if r.Scaler == f.name || !pidAlive(r.Pid, r.AgentID) {
			continue
		}
		if ip, err := netip.ParseAddr(r.IP); err == nil {
			if err := f.host.alloc.Reserve(ip, r.AgentID); err != nil {
				f.log.Warn("live VM address not reserved", "agent", r.AgentID, "err", err)
			}
		}
	}
}

func (f *Firecracker) records() []vmRecord {
	ents, err := os.ReadDir(f.base)
	if err != nil {
		return nil
	}
	var out []vmRecord
	for _, d := range ents {
		if !d.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(f.base, d.Name(), vmRecordFile))
		if err != nil {
			continue
		}
		var r vmRecord
		if json.Unmarshal(b, &r) == nil && r.AgentID == d.Name() {
			out = append(out, r)
		}
	}
	return out
}

// pidAlive reports whether pid runs and its command line names VM id (a
// recycled pid does not count).
func pidAlive(pid int, id string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(string(b), "\x00"), id)
}

func (f *Firecracker) sweepLoop() {
	t := time.NewTicker(f.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			if _, err := f.ReapOrphans(ctx); err != nil {
				f.log.Warn("firecracker orphan sweep", "err", err)
			}
			cancel()
		}
	}
}

// vmSize resolves vCPUs and memory: limits (cpus rounded up, memory
// floored to MiB) > the scaler's vcpuCount/memSizeMib.
func vmSize(e *Entry, l Limits) (vcpus, memMib int) {
	vcpus, memMib = e.VcpuCount, e.MemSizeMib
	if l.NanoCPUs > 0 {
		vcpus = int((l.NanoCPUs + 1e9 - 1) / 1e9)
	}
	if l.MemoryBytes > 0 {
		memMib = int(l.MemoryBytes >> 20)
	}
	return vcpus, memMib
}

// bootArgs is the guest kernel command line (KiCI buildVmConfig) with the
// static address of the VM.
func bootArgs(ip, gw netip.Addr, bits int) string {
	m := uint32(0xffffffff) << (32 - bits)
	mask := [4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
	return fmt.Sprintf("console=ttyS0 reboot=k panic=1 random.trust_cpu=on init=/init ip=%s::%s:%s::eth0:off",
		ip, gw, netip.AddrFrom4(mask))
}

// guestMAC is 06:00:AC plus the address's last three octets (KiCI).
func guestMAC(ip netip.Addr) string {
	a := ip.As4()
	return fmt.Sprintf("06:00:AC:%02X:%02X:%02X", a[1], a[2], a[3])
}

// orchestratorPort is the TCP port of a ws:// or wss:// URL.
func orchestratorPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("orchestrator URL %q: %w", raw, err)
	}
	if p := u.Port(); p != "" {
		return strconv.Atoi(p)
	}
	switch u.Scheme {
	case "ws", "http":
		return 80, nil
	case "wss", "https":
		return 443, nil
	}
	return 0, fmt.Errorf("orchestrator URL %q has no port", raw)
}

// metadata is the MMDS document the guest agent reads (see
// docs/scaling.md, "MMDS contract").
func (f *Firecracker) metadata(req *SpawnRequest) (map[string]any, error) {
	env := map[string]string{}
	size := 0
	add := func(k, v string) error {
		if !envRe.MatchString(k) {
			return nil
		}
		size += len(k) + len(v) + 2
		if size > mmdsEnvBudget {
			return fmt.Errorf("agent environment exceeds the MMDS budget of %d bytes", mmdsEnvBudget)
		}
		env[k] = v
		return nil
	}
	for _, kv := range forwardedEnv(f.opts.Environ) {
		k, v, _ := strings.Cut(kv, "=")
		if err := add(k, v); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(req.LabelSet.Env))
	for k := range req.LabelSet.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := add(k, req.LabelSet.Env[k]); err != nil {
			return nil, err
		}
	}
	md := map[string]any{
		"kici-orchestrator-url": req.OrchestratorURL,
		"kici-agent-id":         req.AgentID,
		"kici-agent-token":      req.Token,
		"kici-labels":           strings.Join(req.LabelSet.Labels, ","),
		"kici-scaler-managed":   "true",
		"kici-gateway-ip":       f.host.net.gw.String(),
		"kici-env":              env,
	}
	if req.Warm {
		md["kici-scaler-idle-timeout"] = warmAgentIdleTimeoutMs
	}
	return map[string]any{"latest": map[string]any{"meta-data": md}}, nil
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
	req.Emit(EventProvisioning, fmt.Sprintf("microVM %s: address %s, TAP %s on %s", v.id, ip, v.tap, n.BridgeName))
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
	req.Emit(EventProvisioning, fmt.Sprintf("jailer started (pid %d), waiting for the API socket", proc.Pid()))

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
			return v.api.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: jailKernel, BootArgs: bootArgs(ip, n.gw, n.prefix.Bits())})
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

// waitSocket waits until the API socket file exists, the process ended or
// ctx ended.
func waitSocket(ctx context.Context, sock string, proc VMMProcess) error {
	for {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("jailer exited before the API socket appeared: %v", proc.Err())
		case <-ctx.Done():
			return fmt.Errorf("API socket %s did not appear: %w", sock, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// linkOrCopy hard-links src to dst, or copies it when linking fails or
// src is not world-readable (the copy is then owned by uid:gid, mode 0400,
// so the original's owner and mode never change).
func linkOrCopy(src, dst string, uid, gid int) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if fi.Mode().Perm()&0o004 != 0 {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chown(dst, uid, gid)
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
		select {
		case <-v.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
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
	select {
	case <-v.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReapOrphans removes what this scaler created but does not track (left
// by a killed orchestrator): jails tagged with its name (their VMM process
// group is killed first), TAPs whose alias carries its name, and its
// tagged nft rules. It first retries EnsureHostReady when the host was not
// ready (the Manager calls ReapOrphans on reload). It returns how many
// leftovers it removed; it never runs twice at once.
func (f *Firecracker) ReapOrphans(ctx context.Context) (int, error) {
	f.sweepMu.Lock()
	defer f.sweepMu.Unlock()
	if err := f.host.EnsureHostReady(ctx); err != nil {
		return 0, fmt.Errorf("firecracker host not ready: %w", err)
	}
	tracked := func(id string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		_, ok := f.vms[id]
		return ok
	}
	prefix := "kici-fc:" + f.name + ":"
	n := 0
	for _, r := range f.records() {
		if r.Scaler != f.name || tracked(r.AgentID) {
			continue
		}
		if pidAlive(r.Pid, r.AgentID) {
			_ = syscall.Kill(-r.Pid, syscall.SIGKILL)
		}
		if err := os.RemoveAll(filepath.Join(f.base, r.AgentID)); err != nil {
			return n, err
		}
		f.host.alloc.Release(r.AgentID)
		f.log.Info("removed orphaned microVM jail", "agent", r.AgentID)
		n++
	}
	taps, err := f.host.taggedTaps(ctx)
	if err != nil {
		return n, err
	}
	for name, tag := range taps {
		id, ok := strings.CutPrefix(tag, prefix)
		if !ok || tracked(id) {
			continue
		}
		if _, err := f.host.run.Run(ctx, "", "ip", "link", "del", "dev", name); err != nil {
			return n, err
		}
		f.host.alloc.Release(id)
		f.log.Info("removed orphaned TAP", "tap", name, "agent", id)
		n++
	}
	rules, err := f.host.vmRules(ctx)
	if err != nil {
		return n, err
	}
	for tag, handles := range rules {
		id, ok := strings.CutPrefix(tag, prefix)
		if !ok || tracked(id) {
			continue
		}
		for _, h := range handles {
			if _, err := f.host.run.Run(ctx, "", "nft", "delete", "rule", "inet", f.host.net.Table, vmsInChain, "handle", h); err != nil {
				return n, err
			}
			n++
		}
		f.host.alloc.Release(id)
	}
	return n, nil
}

// Shutdown refuses further spawns and destroys every VM (bounded by ctx).
func (f *Firecracker) Shutdown(ctx context.Context) {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.stop)
	}
	ids := make([]string, 0, len(f.vms))
	for id := range f.vms {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f.Destroy(ctx, id) }()
	}
	wg.Wait()
}
