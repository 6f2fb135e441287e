package scaler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/scaler/fcapi"
	"kici.dev/kici/internal/scaler/fcapi/fcapitest"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/testutil/wait"
)

// TestMain lets the test binary stand in for the jailer: the wrapper
// script written by newFCEnv re-executes it with KICI_FAKE_JAILER=1.
func TestMain(m *testing.M) {
	if os.Getenv("KICI_FAKE_JAILER") == "1" {
		os.Exit(fcapitest.FakeJailer(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeHost is a recording HostRunner that also simulates the state the
// backend reads back: the bridge, its address, the nft table, TAPs with
// their aliases and the rules of vms_in with their handles.
type fakeHost struct {
	mu       sync.Mutex
	calls    []string
	bridge   string
	brExists bool
	brAddr   string // "10.0.0.1/28" once assigned
	brUp     bool
	table    bool
	failOn   string // argv prefix that fails
	taps     map[string]string
	tapUp    map[string]bool
	rules    []fakeRule
	handle   int
	extra    []string // further `ip -o link show` lines
}

type fakeRule struct {
	handle int
	text   string
}

func newFakeHost(bridge string) *fakeHost {
	return &fakeHost{bridge: bridge, taps: map[string]string{}, tapUp: map[string]bool{}, handle: 10}
}

func (h *fakeHost) Run(_ context.Context, stdin string, argv ...string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	line := strings.Join(argv, " ")
	if stdin != "" {
		line += " <<" + stdin
	}
	h.calls = append(h.calls, line)
	if h.failOn != "" && strings.HasPrefix(line, h.failOn) {
		return "", fmt.Errorf("%s: exit status 1: Operation not permitted", argv[0])
	}
	j := strings.Join(argv, " ")
	br := h.bridge
	switch {
	case j == "ip link show dev "+br:
		if !h.brExists {
			return "", errors.New(`Device "` + br + `" does not exist.`)
		}
		return "", nil
	case j == "ip link add name "+br+" type bridge":
		h.brExists = true
		return "", nil
	case j == "ip -4 -o addr show dev "+br:
		if !h.brExists {
			return "", errors.New("no such device")
		}
		if h.brAddr == "" {
			return "", nil
		}
		return "5: " + br + "    inet " + h.brAddr + " brd 10.0.0.15 scope global " + br + "\\       valid_lft forever\n", nil
	case strings.HasPrefix(j, "ip addr add ") && strings.HasSuffix(j, " dev "+br):
		h.brAddr = argv[3]
		return "", nil
	case j == "ip link set dev "+br+" up":
		h.brUp = true
		return "", nil
	case j == "ip -o link show dev "+br:
		flags := "BROADCAST,MULTICAST"
		if h.brUp {
			flags += ",UP,LOWER_UP"
		}
		return "5: " + br + ": <" + flags + "> mtu 1500\n", nil
	case strings.HasPrefix(j, "sysctl -w"):
		return "", nil
	case j == "nft -f -":
		h.table = true
		return "", nil
	case strings.HasPrefix(j, "nft list chain inet "):
		if !h.table {
			return "", errors.New("No such file or directory")
		}
		return "table inet x {\n\tchain input {\n\t\tiifname \"" + br + "\" jump vms_in\n\t\tiifname \"" + br + "\" drop\n\t}\n}\n", nil
	case len(argv) == 11 && j == "ip tuntap add dev "+argv[4]+" mode tap user "+argv[8]+" group "+argv[10]:
		if _, ok := h.taps[argv[4]]; ok {
			return "", errors.New("ioctl(TUNSETIFF): Device or resource busy")
		}
		h.taps[argv[4]] = ""
		return "", nil
	case strings.HasPrefix(j, "ip link set dev "):
		tap := argv[4]
		if _, ok := h.taps[tap]; !ok {
			return "", errors.New(`Cannot find device "` + tap + `"`)
		}
		if argv[5] == "alias" {
			h.taps[tap] = argv[6]
		}
		if argv[5] == "up" {
			h.tapUp[tap] = true
		}
		return "", nil
	case strings.HasPrefix(j, "ip link del dev "):
		if _, ok := h.taps[argv[4]]; !ok {
			return "", errors.New(`Cannot find device "` + argv[4] + `"`)
		}
		delete(h.taps, argv[4])
		return "", nil
	case j == "ip -o link show":
		var b strings.Builder
		b.WriteString("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\\    link/loopback 00:00:00:00:00:00\n")
		i := 20
		names := mapsKeys(h.taps)
		slices.Sort(names)
		for _, name := range names {
			fmt.Fprintf(&b, "%d: %s: <BROADCAST,MULTICAST,UP> mtu 1500 master %s\\    link/ether 3a:00:00:00:00:%02x brd ff:ff:ff:ff:ff:ff", i, name, br, i)
			if a := h.taps[name]; a != "" {
				b.WriteString("\\    alias " + a)
			}
			b.WriteString("\n")
			i++
		}
		for _, l := range h.extra {
			b.WriteString(l + "\n")
		}
		return b.String(), nil
	case len(argv) > 5 && strings.HasPrefix(j, "nft add rule inet ") && argv[5] == vmsInChain:
		h.handle++
		h.rules = append(h.rules, fakeRule{h.handle, strings.Join(argv[6:], " ")})
		return "", nil
	case strings.HasPrefix(j, "nft -a list chain inet "):
		var b strings.Builder
		b.WriteString("table inet t {\n\tchain vms_in {\n")
		for _, r := range h.rules {
			fmt.Fprintf(&b, "\t\t%s # handle %d\n", r.text, r.handle)
		}
		b.WriteString("\t}\n}\n")
		return b.String(), nil
	case strings.HasPrefix(j, "nft delete rule inet "):
		n, _ := strconv.Atoi(argv[len(argv)-1])
		for i, r := range h.rules {
			if r.handle == n {
				h.rules = slices.Delete(h.rules, i, i+1)
				return "", nil
			}
		}
		return "", errors.New("Could not process rule: No such file or directory")
	}
	return "", fmt.Errorf("fakeHost: unexpected command %q", j)
}

func mapsKeys(m map[string]string) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	return k
}

func (h *fakeHost) snapshot() (calls []string, taps map[string]string, rules []fakeRule) {
	h.mu.Lock()
	defer h.mu.Unlock()
	taps = map[string]string{}
	for k, v := range h.taps {
		taps[k] = v
	}
	return append([]string(nil), h.calls...), taps, append([]fakeRule(nil), h.rules...)
}

// fcEnv is a scratch firecracker setup: kernel and rootfs files, the jail
// base, the log directory of the fake jailer and its wrapper script.
type fcEnv struct {
	dir, kernel, rootfs, fc, jail, logs string
}

func newFCEnv(t *testing.T) *fcEnv {
	t.Helper()
	// Short: the API socket path inside the jail must fit a unix address.
	d, err := os.MkdirTemp("", "fc")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	e := &fcEnv{dir: d, kernel: filepath.Join(d, "vmlinux"), rootfs: filepath.Join(d, "agent.ext4"),
		fc: filepath.Join(d, "bin", "firecracker"), jail: filepath.Join(d, "jail"), logs: filepath.Join(d, "logs")}
	for _, p := range []string{e.logs, filepath.Dir(e.fc)} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(e.kernel, []byte("kernel image"), 0o644))
	must(t, os.WriteFile(e.rootfs, []byte("ext4 image"), 0o644))
	must(t, os.WriteFile(e.fc, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// jailer writes a jailer wrapper running the test binary as FakeJailer in
// mode ("" normal, "hang", "ignore-ctrlaltdel").
func (e *fcEnv) jailer(t *testing.T, mode string) string {
	t.Helper()
	exe, err := os.Executable()
	must(t, err)
	p := filepath.Join(e.dir, "bin", "jailer-"+mode)
	script := fmt.Sprintf("#!/bin/sh\nexport KICI_FAKE_JAILER=1 %s=%q %s=%q\nexec %q \"$@\"\n",
		fcapitest.EnvMode, mode, fcapitest.EnvLog, e.logs, exe)
	must(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

func (e *fcEnv) doc(jailer string, extra string) string {
	return fmt.Sprintf(`version: 1
scalers:
  - name: fc
    type: firecracker
    maxAgents: 8
    maxConcurrentSpawns: 8
    firecrackerPath: %s
    jailerPath: %s
    kernelPath: %s
    uid: %d
    gid: %d
    chrootBaseDir: %s
    orchestratorUrl: ws://10.0.0.1:4000/ws
    labelSets:
      - labels: [linux, vm]
        rootfsPath: %s
        resources: { cpus: 1.5, memory: 1g }
        env: { GREETING: hello }
%s
firecracker: { cidr: 10.0.0.0/28, bridgeName: kici-brt, table: kici_t%s }
`, e.fc, jailer, e.kernel, os.Getuid(), os.Getgid(), e.jail, e.rootfs, extraScalers, extra)
}

// extraScalers adds a non-firecracker scaler (served by fakeBackend).
const extraScalers = `  - name: other
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [plain]`

type fcFixture struct {
	*mgrFixture
	host  *fakeHost
	env   *fcEnv
	other *fakeBackend
	fc    *Firecracker
}

// newFCFixture runs a Manager over doc whose firecracker scalers run host
// commands through host: a *fakeHost, or ExecRunner on a real host.
func newFCFixture(t *testing.T, env *fcEnv, doc string, host HostRunner, timeout time.Duration) *fcFixture {
	t.Helper()
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte(doc))
	must(t, err)
	fake, _ := host.(*fakeHost)
	f := &fcFixture{host: fake, env: env}
	mf := &mgrFixture{backends: map[string]*fakeBackend{}, tokens: &fakeTokens{ttls: map[string]time.Duration{}},
		settings: &liveSettings{}, log: &memLog{lines: map[string][]string{}}, exits: map[string]error{}}
	mf.settings.ttl.Store(int64(time.Hour))
	mf.settings.timeout.Store(int64(timeout))
	next := func(e *Entry, exited func(string, error)) (Backend, error) {
		b := &fakeBackend{name: e.Name, exited: exited, running: map[string]bool{}}
		f.other = b
		return b, nil
	}
	inner := WithFirecracker(next, FirecrackerOptions{Runner: host, StopGrace: 2 * time.Second,
		Environ: []string{"KICI_AGENT_ENV_FORWARDED=yes", "KICI_AGENT_ENV_API_TOKEN=nope", "HOME=/root"}})
	mf.m, err = NewManager(cfg, Options{Tokens: mf.tokens, Settings: mf.settings, Exited: mf.recordExit, Events: mf.log, FailureBackoff: time.Minute,
		Backends: func(e *Entry, exited func(string, error)) (Backend, error) {
			b, err := inner(e, exited)
			if fc, ok := b.(*Firecracker); ok {
				f.fc = fc
			}
			return b, err
		}})
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mf.m.Shutdown(ctx)
	})
	f.mgrFixture = mf
	return f
}

func (f *fcFixture) agentState(id string) AgentState {
	for _, s := range f.m.Status().Scalers {
		for _, a := range s.Agents {
			if a.AgentID == id {
				return a.State
			}
		}
	}
	return ""
}

func (f *fcFixture) calls(t *testing.T, id string) []fcapitest.Call {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.env.logs, id+".calls"))
	if err != nil {
		return nil
	}
	var out []fcapitest.Call
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var c fcapitest.Call
		must(t, json.Unmarshal([]byte(l), &c))
		out = append(out, c)
	}
	return out
}

func fakePid(t *testing.T, env *fcEnv, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.logs, id+".pid"))
	must(t, err)
	pid, err := strconv.Atoi(string(b))
	must(t, err)
	return pid
}

func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	// A zombie still answers kill(0); it is gone for our purposes.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(b), ") Z ")
}

func TestFirecrackerConfig(t *testing.T) {
	env := newFCEnv(t)
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte(env.doc("/usr/bin/jailer", "")))
	must(t, err)
	e := cfg.Scalers[0]
	if e.VcpuCount != 2 || e.MemSizeMib != 512 || e.Network == nil || e.Network.Gateway != "10.0.0.1" || !*e.Network.AutoProvisionHost {
		t.Fatalf("defaults not applied: %+v net %+v", e.FirecrackerEntry, e.Network)
	}
	bad := []struct{ doc, want string }{
		{strings.Replace(env.doc("/usr/bin/jailer", ""), "    uid:", "    bogusKey: 1\n    uid:", 1), "bogusKey"},
		{strings.Replace(env.doc("/usr/bin/jailer", ""), "    jailerPath: /usr/bin/jailer\n", "", 1), "scalers[0].jailerPath: required"},
		{strings.Replace(env.doc("/usr/bin/jailer", ""), "        rootfsPath: "+env.rootfs+"\n", "", 1), "scalers[0].labelSets[0].rootfsPath: required"},
		{env.doc("/usr/bin/jailer", ", netmask: 255.255.255.240"), "netmask"},
		{strings.Replace(env.doc("/usr/bin/jailer", ""), "cidr: 10.0.0.0/28", "cidr: 10.0.0.5/28", 1), "firecracker.cidr"},
		{strings.Replace(env.doc("/usr/bin/jailer", ""), "      - labels: [plain]", "      - labels: [plain]\n        rootfsPath: /x.ext4", 1), "scalers[1].labelSets[0].rootfsPath: applies to firecracker scalers only"},
		{strings.Replace(env.doc("/usr/bin/jailer", ""), "firecrackerPath: "+env.fc, "firecrackerPath: /usr/bin/vmm", 1), "scalers[0].firecrackerPath"},
		{"version: 1\nscalers:\n" + extraScalers + "\nfirecracker: { cidr: 10.0.0.0/24 }\n", "firecracker: no scaler has type firecracker"},
	}
	for i, c := range bad {
		_, err := scalerconfig.Parse("scalers.yaml", []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "scalers.yaml") {
			t.Errorf("case %d: error %v, want file and %q", i, err, c.want)
		}
	}
}

func TestIPAllocator(t *testing.T) {
	a := NewIPAllocator(netip.MustParsePrefix("10.0.0.0/29"), netip.MustParseAddr("10.0.0.1"))
	var got []string
	for i := 0; i < 5; i++ {
		ip, err := a.Allocate(fmt.Sprint("vm", i))
		must(t, err)
		got = append(got, ip.String())
	}
	// .0 network, .1 gateway, .7 broadcast are skipped: 5 addresses.
	if want := "10.0.0.2 10.0.0.3 10.0.0.4 10.0.0.5 10.0.0.6"; strings.Join(got, " ") != want {
		t.Fatalf("allocated %v, want %s", got, want)
	}
	if _, err := a.Allocate("vm9"); !errors.Is(err, ErrSubnetFull) {
		t.Fatalf("full subnet: %v", err)
	}
	a.Release("vm2")
	if ip, _ := a.Allocate("vm9"); ip.String() != "10.0.0.4" {
		t.Fatalf("released address not reused: %s", ip)
	}
	if err := a.Reserve(netip.MustParseAddr("10.0.0.3"), "intruder"); err == nil {
		t.Fatal("Reserve took an address held by another VM")
	}
	if err := a.Reserve(netip.MustParseAddr("10.0.0.1"), "x"); err == nil {
		t.Fatal("Reserve took the gateway")
	}

	// Concurrent owners never share an address.
	b := NewIPAllocator(netip.MustParsePrefix("10.1.0.0/24"), netip.MustParseAddr("10.1.0.1"))
	var wg sync.WaitGroup
	for i := 0; i < 253; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = b.Allocate(fmt.Sprint("o", i)) }()
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for _, ip := range b.InUse() {
		if seen[ip] {
			t.Fatalf("address %s handed out twice", ip)
		}
		seen[ip] = true
	}
	if len(seen) != 253 {
		t.Fatalf("%d addresses handed out, want 253", len(seen))
	}
}

func TestFCAPIValidationErrors(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "vmlinux"), []byte("k"), 0o644))
	v := &fcapitest.VMM{Root: dir}
	sock := filepath.Join(dir, "api.sock")
	must(t, v.Serve(sock))
	defer v.Close()
	c := fcapi.New(sock)
	ctx := context.Background()
	err := c.Action(ctx, fcapi.ActionInstanceStart)
	var fe *fcapi.Error
	if !errors.As(err, &fe) || fe.Status != 400 || !strings.Contains(fe.FaultMessage, "missing kernel configuration") {
		t.Fatalf("InstanceStart before boot-source: %v", err)
	}
	err = c.PutMMDSConfig(ctx, fcapi.MMDSConfig{NetworkInterfaces: []string{"eth0"}})
	if !errors.As(err, &fe) || !strings.Contains(fe.FaultMessage, "does not correspond to any existing network interface") {
		t.Fatalf("mmds/config before the interface: %v", err)
	}
	if err := c.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/missing"}); !errors.As(err, &fe) || !strings.Contains(err.Error(), "kernel file cannot be opened") {
		t.Fatalf("missing kernel: %v", err)
	}
	must(t, c.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/vmlinux"}))
	must(t, c.Action(ctx, fcapi.ActionInstanceStart))
	if err := c.PutMachineConfig(ctx, fcapi.MachineConfig{VcpuCount: 1, MemSizeMib: 128}); !errors.As(err, &fe) || !strings.Contains(fe.FaultMessage, "after starting") {
		t.Fatalf("machine-config after start: %v", err)
	}
	// A VMM that never answers: the client gives up with its context.
	hv := &fcapitest.VMM{Root: dir, Hang: true}
	hs := filepath.Join(dir, "hang.sock")
	must(t, hv.Serve(hs))
	defer hv.Close()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := fcapi.New(hs).Action(cctx, fcapi.ActionInstanceStart); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging VMM: %v", err)
	}
}

// hostProvisionCalls are the commands EnsureHostReady runs on a host
// without the bridge (autoProvisionHost true).
func hostProvisionCalls(f *fcFixture) []string {
	n := f.fc.host.net
	return []string{
		"ip link show dev kici-brt",
		"ip link add name kici-brt type bridge",
		"ip -4 -o addr show dev kici-brt",
		"ip addr add 10.0.0.1/28 dev kici-brt",
		"ip link set dev kici-brt up",
		"sysctl -w net.ipv4.ip_forward=1",
		"nft -f - <<" + f.fc.host.baselineScript(),
		"ip -o link show",
		"nft -a list chain inet " + n.Table + " vms_in",
	}
}

func TestFirecrackerSpawnAndDestroyThroughManager(t *testing.T) {
	env := newFCEnv(t)
	host := newFakeHost("kici-brt")
	f := newFCFixture(t, env, env.doc(env.jailer(t, ""), ""), host, 10*time.Second)
	calls, _, _ := host.snapshot()
	if want := hostProvisionCalls(f); !slices.Equal(calls, want) {
		t.Fatalf("host provisioning commands:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(f.fc.host.baselineScript(), `add rule inet kici_t input iifname "kici-brt" drop`) {
		t.Fatalf("baseline lacks the host drop:\n%s", f.fc.host.baselineScript())
	}
	nBase := len(calls)

	id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "job-1", RunID: "run-1", RunsOn: []string{"vm"}})
	must(t, err)
	wait.For(t, 5*time.Second, "VM running", func() bool { return f.agentState(id) == AgentRunning })
	tap := tapName(id)
	tag := "kici-fc:fc:" + id

	// Host commands of the spawn, in order.
	calls, taps, rules := host.snapshot()
	wantHost := []string{
		fmt.Sprintf("ip tuntap add dev %s mode tap user %d group %d", tap, os.Getuid(), os.Getgid()),
		"ip link set dev " + tap + " alias " + tag,
		"ip link set dev " + tap + " master kici-brt",
		"ip link set dev " + tap + " type bridge_slave isolated on",
		"ip link set dev " + tap + " up",
		"nft add rule inet kici_t vms_in ip saddr 10.0.0.2 tcp dport 4000 accept comment \"" + tag + "\"",
	}
	if got := calls[nBase:]; !slices.Equal(got, wantHost) {
		t.Fatalf("spawn host commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantHost, "\n"))
	}
	if taps[tap] != tag || len(rules) != 1 {
		t.Fatalf("host state after spawn: taps %v rules %v", taps, rules)
	}

	// The jailer command line.
	b, err := os.ReadFile(filepath.Join(env.logs, id+".argv"))
	must(t, err)
	var argv []string
	must(t, json.Unmarshal(b, &argv))
	wantArgv := []string{"--id", id, "--exec-file", env.fc, "--uid", fmt.Sprint(os.Getuid()), "--gid", fmt.Sprint(os.Getgid()),
		"--chroot-base-dir", env.jail, "--", "--api-sock", "/run/firecracker.socket"}
	if !slices.Equal(argv, wantArgv) {
		t.Fatalf("jailer argv %q, want %q", argv, wantArgv)
	}
	// The jail: kernel and rootfs hard-linked into <base>/firecracker/<id>/root.
	root := filepath.Join(env.jail, "firecracker", id, "root")
	for src, dst := range map[string]string{env.kernel: "vmlinux", env.rootfs: "rootfs.ext4"} {
		a, err1 := os.Stat(src)
		c, err2 := os.Stat(filepath.Join(root, dst))
		if err1 != nil || err2 != nil || !os.SameFile(a, c) {
			t.Fatalf("%s not hard-linked into the jail: %v %v", dst, err1, err2)
		}
	}

	// The API calls, in order, all answered 204.
	got := f.calls(t, id)
	var paths []string
	for _, c := range got {
		if c.Status != 204 && c.Status != 200 {
			t.Fatalf("call %s %s answered %d: %s", c.Method, c.Path, c.Status, c.Body)
		}
		paths = append(paths, c.Method+" "+c.Path)
	}
	wantPaths := []string{"GET /", "PUT /machine-config", "PUT /boot-source", "PUT /drives/rootfs", "PUT /network-interfaces/eth0",
		"PUT /mmds/config", "PUT /mmds", "PUT /actions"}
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("API calls %v, want %v", paths, wantPaths)
	}
	body := func(i int) map[string]any {
		var m map[string]any
		must(t, json.Unmarshal(got[i].Body, &m))
		return m
	}
	if m := body(1); m["vcpu_count"] != 2.0 || m["mem_size_mib"] != 1024.0 {
		t.Errorf("machine-config %v: want 2 vCPUs (1.5 rounded up) and 1024 MiB", m)
	}
	if m := body(2); m["kernel_image_path"] != "/vmlinux" ||
		m["boot_args"] != "console=ttyS0 reboot=k panic=1 random.trust_cpu=on init=/init ip=10.0.0.2::10.0.0.1:255.255.255.240::eth0:off" {
		t.Errorf("boot-source %v", m)
	}
	if m := body(3); m["path_on_host"] != "/rootfs.ext4" || m["is_root_device"] != true || m["is_read_only"] != true {
		t.Errorf("drive %v", m)
	}
	if m := body(4); m["host_dev_name"] != tap || m["guest_mac"] != "06:00:AC:00:00:02" {
		t.Errorf("network interface %v", m)
	}
	if m := body(5); m["ipv4_address"] != "169.254.169.254" || fmt.Sprint(m["network_interfaces"]) != "[eth0]" {
		t.Errorf("mmds config %v", m)
	}
	var mmds struct {
		Latest struct {
			MD map[string]any `json:"meta-data"`
		} `json:"latest"`
	}
	must(t, json.Unmarshal(got[6].Body, &mmds))
	md := mmds.Latest.MD
	if md["kici-agent-id"] != id || md["kici-agent-token"] != "kat_"+id || md["kici-orchestrator-url"] != "ws://10.0.0.1:4000/ws" ||
		md["kici-labels"] != "linux,vm" || md["kici-gateway-ip"] != "10.0.0.1" || md["kici-scaler-managed"] != "true" {
		t.Errorf("MMDS meta-data %v", md)
	}
	if e, _ := md["kici-env"].(map[string]any); e["GREETING"] != "hello" || e["FORWARDED"] != "yes" || e["API_TOKEN"] != nil || e["HOME"] != nil {
		t.Errorf("MMDS kici-env %v", md["kici-env"])
	}
	if m := body(7); m["action_type"] != "InstanceStart" {
		t.Errorf("last action %v", m)
	}

	// Destroy through the Manager: SendCtrlAltDel, the VMM ends, all gone.
	pid := fakePid(t, env, id)
	f.m.Stop(id)
	wait.For(t, 5*time.Second, "agent released", func() bool { return f.m.Status().Active == 0 })
	// The exit callback runs after the reservation is released.
	wait.For(t, 5*time.Second, "exit reported", func() bool { _, ok := f.exit(id); return ok })
	if err, _ := f.exit(id); err != nil {
		t.Fatalf("exit reported an error: %v", err)
	}
	got = f.calls(t, id)
	if last := got[len(got)-1]; last.Path != "/actions" || !strings.Contains(string(last.Body), "SendCtrlAltDel") {
		t.Fatalf("destroy did not send SendCtrlAltDel: %+v", last)
	}
	assertVMGone(t, f, id, pid)
}

func assertVMGone(t *testing.T, f *fcFixture, id string, pid int) {
	t.Helper()
	var left []string
	if !wait.Until(10*time.Second, func() bool {
		left = left[:0]
		if !processGone(pid) {
			left = append(left, fmt.Sprintf("VMM process %d", pid))
		}
		_, taps, rules := f.host.snapshot()
		if _, ok := taps[tapName(id)]; ok {
			left = append(left, "TAP "+tapName(id))
		}
		for _, r := range rules {
			if strings.Contains(r.text, id) {
				left = append(left, "nft rule "+r.text)
			}
		}
		if _, err := os.Stat(filepath.Join(f.env.jail, "firecracker", id)); !os.IsNotExist(err) {
			left = append(left, fmt.Sprintf("jail (%v)", err))
		}
		if ip, ok := f.fc.host.alloc.InUse()[id]; ok {
			left = append(left, "address "+ip.String())
		}
		return len(left) == 0
	}) {
		t.Fatalf("left behind by %s: %s", id, strings.Join(left, "; "))
	}
}

func TestFirecrackerConcurrentSpawnsGetUniqueAddresses(t *testing.T) {
	env := newFCEnv(t)
	host := newFakeHost("kici-brt")
	f := newFCFixture(t, env, env.doc(env.jailer(t, ""), ""), host, 15*time.Second)
	var ids []string
	for i := 0; i < 6; i++ {
		id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: fmt.Sprint("job-", i), RunID: "r", RunsOn: []string{"vm"}})
		must(t, err)
		ids = append(ids, id)
	}
	wait.For(t, 5*time.Second, "6 VMs running", func() bool {
		for _, id := range ids {
			if f.agentState(id) != AgentRunning {
				return false
			}
		}
		return true
	})
	seen := map[string]string{}
	for _, id := range ids {
		var ip string
		for _, c := range f.calls(t, id) {
			if c.Path == "/boot-source" {
				var m map[string]string
				must(t, json.Unmarshal(c.Body, &m))
				ip = strings.TrimPrefix(strings.SplitN(m["boot_args"], "ip=", 2)[1], "")
				ip = strings.SplitN(ip, ":", 2)[0]
			}
		}
		if ip == "" || seen[ip] != "" {
			t.Fatalf("VM %s got address %q (already %q)", id, ip, seen[ip])
		}
		if got := f.fc.host.alloc.InUse()[id].String(); got != ip {
			t.Fatalf("allocator holds %s for %s, VM booted with %s", got, id, ip)
		}
		seen[ip] = id
	}
	_, taps, rules := host.snapshot()
	if len(taps) != 6 || len(rules) != 6 {
		t.Fatalf("want 6 TAPs and 6 rules, got %v %v", taps, rules)
	}
	pids := map[string]int{}
	for _, id := range ids {
		pids[id] = fakePid(t, env, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	f.m.Shutdown(ctx)
	for _, id := range ids {
		assertVMGone(t, f, id, pids[id])
	}
	if n := len(f.fc.host.alloc.InUse()); n != 0 {
		t.Fatalf("%d addresses still allocated", n)
	}
}

func TestFirecrackerSpawnDeadlineAbortsHangingVMM(t *testing.T) {
	env := newFCEnv(t)
	host := newFakeHost("kici-brt")
	f := newFCFixture(t, env, env.doc(env.jailer(t, "hang"), ""), host, 800*time.Millisecond)
	id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "job-h", RunID: "r", RunsOn: []string{"vm"}})
	must(t, err)
	wait.For(t, 5*time.Second, "spawn failure reported", func() bool { _, ok := f.exit(id); return ok })
	if f.m.Status().Active != 0 {
		t.Fatalf("reservation not released: %+v", f.m.Status())
	}
	_, err = f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "job-h", RunID: "r", RunsOn: []string{"vm"}})
	if err == nil || !strings.Contains(err.Error(), "spawn deadline of 800ms exceeded") {
		t.Fatalf("pending reason %v", err)
	}
	if calls := f.calls(t, id); len(calls) != 0 {
		t.Fatalf("a hanging VMM answered: %v", calls)
	}
	assertVMGone(t, f, id, fakePid(t, env, id))
}

func TestFirecrackerOrphanSweepAtStartAndReload(t *testing.T) {
	env := newFCEnv(t)
	host := newFakeHost("kici-brt")
	host.brExists, host.brAddr, host.brUp, host.table = true, "10.0.0.1/28", true, true
	jailer := env.jailer(t, "ignore-ctrlaltdel")
	// Leftovers of a killed orchestrator: a running VMM with its jail, TAP
	// and rule, plus another scaler's TAP that must stay.
	leftover := func(id string) int {
		dir := filepath.Join(env.jail, "firecracker", id)
		must(t, os.MkdirAll(filepath.Join(dir, "root", "run"), 0o755))
		p, err := ExecLauncher{}.Launch(&JailSpec{JailerPath: jailer, ExecFile: env.fc, ID: id, UID: os.Getuid(), GID: os.Getgid(),
			ChrootBaseDir: env.jail, APISock: jailAPISock})
		must(t, err)
		wait.For(t, 5*time.Second, "leftover VMM serving", func() bool {
			_, err := os.Stat(filepath.Join(dir, "root", jailAPISock))
			return err == nil
		})
		rec, _ := json.Marshal(vmRecord{Scaler: "fc", AgentID: id, IP: "10.0.0.9", Tap: tapName(id), Pid: p.Pid()})
		must(t, os.WriteFile(filepath.Join(dir, vmRecordFile), rec, 0o600))
		host.mu.Lock()
		host.taps[tapName(id)] = "kici-fc:fc:" + id
		host.handle++
		host.rules = append(host.rules, fakeRule{host.handle, `ip saddr 10.0.0.9 tcp dport 4000 accept comment "kici-fc:fc:` + id + `"`})
		host.mu.Unlock()
		return p.Pid()
	}
	pid1 := leftover("scaler-firecracker-0badf00d")
	host.taps["kici-0000beef"] = "kici-fc:another:scaler-firecracker-0000beef"
	host.extra = []string{"9: eth0: <BROADCAST,MULTICAST,UP> mtu 1500\\    link/ether 52:54:00:00:00:01"}

	f := newFCFixture(t, env, env.doc(env.jailer(t, ""), ""), host, 10*time.Second)
	assertVMGone(t, f, "scaler-firecracker-0badf00d", pid1)
	_, taps, _ := host.snapshot()
	if taps["kici-0000beef"] == "" {
		t.Fatal("another scaler's TAP was removed")
	}

	// A live VM of this scaler survives the reload sweep; a new leftover does not.
	id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j", RunID: "r", RunsOn: []string{"vm"}})
	must(t, err)
	wait.For(t, 5*time.Second, "VM running", func() bool { return f.agentState(id) == AgentRunning })
	pid2 := leftover("scaler-firecracker-1badf00d")
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte(env.doc(env.jailer(t, ""), "")))
	must(t, err)
	must(t, f.m.Reload(cfg))
	assertVMGone(t, f, "scaler-firecracker-1badf00d", pid2)
	if f.agentState(id) != AgentRunning || processGone(fakePid(t, env, id)) {
		t.Fatal("the reload sweep touched a tracked VM")
	}
	_, taps, rules := host.snapshot()
	if taps[tapName(id)] == "" || len(rules) != 1 {
		t.Fatalf("tracked VM's TAP or rule removed: %v %v", taps, rules)
	}

	// Changing the network block of a running scaler is refused.
	cfg, err = scalerconfig.Parse("scalers.yaml", []byte(strings.Replace(env.doc(env.jailer(t, ""), ""), "table: kici_t", "table: kici_u", 1)))
	must(t, err)
	if err := f.m.Reload(cfg); err == nil || !strings.Contains(err.Error(), "cannot change on reload") {
		t.Fatalf("network change on reload: %v", err)
	}
}

func TestFirecrackerHostNotReadyDegradesOnlyThatScaler(t *testing.T) {
	env := newFCEnv(t)
	host := newFakeHost("kici-brt") // no bridge
	f := newFCFixture(t, env, env.doc(env.jailer(t, ""), ", autoProvisionHost: false"), host, 10*time.Second)
	calls, _, _ := host.snapshot()
	if !slices.Equal(calls, []string{"ip link show dev kici-brt"}) {
		t.Fatalf("verify-only host check ran %q", calls)
	}
	if err := f.fc.HostError(); err == nil || !strings.Contains(err.Error(), "bridge kici-brt is missing and autoProvisionHost is false") {
		t.Fatalf("HostError %v", err)
	}
	id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "job-vm", RunID: "r", RunsOn: []string{"vm"}})
	must(t, err)
	wait.For(t, 5*time.Second, "firecracker spawn failed", func() bool { _, ok := f.exit(id); return ok })
	_, err = f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "job-vm", RunID: "r", RunsOn: []string{"vm"}})
	if err == nil || !strings.Contains(err.Error(), "firecracker host not ready: bridge kici-brt is missing") {
		t.Fatalf("pending reason of the firecracker job: %v", err)
	}
	// The other scaler keeps working.
	oid, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "job-plain", RunID: "r", RunsOn: []string{"plain"}})
	must(t, err)
	wait.For(t, 5*time.Second, "other scaler's agent running", func() bool { return f.agentState(oid) == AgentRunning })
	calls, taps, _ := host.snapshot()
	if len(taps) != 0 || slices.ContainsFunc(calls, func(c string) bool { return strings.Contains(c, "tuntap") || strings.HasPrefix(c, "ip link add") }) {
		t.Fatalf("a degraded scaler touched the host: %q", calls)
	}
	// kici-admin scaler list says so: degraded, with the reason; the other
	// scaler is active.
	states := func() map[BackendType]string {
		m := map[BackendType]string{}
		for _, sc := range f.m.Status().Scalers {
			m[sc.Type] = string(sc.State) + ": " + sc.StateReason
		}
		return m
	}
	if st := states(); !strings.HasPrefix(st[TypeFirecracker], string(ScalerDegraded)+": ") || !strings.Contains(st[TypeFirecracker], "bridge kici-brt is missing") ||
		!strings.HasPrefix(st[TypeBareMetal], string(ScalerActive)) {
		t.Fatalf("scaler states %q, want the firecracker one degraded with its reason and the other active", st)
	}
	// Once the operator fixes the host, a reload brings the scaler back.
	host.mu.Lock()
	host.brExists, host.brAddr, host.brUp, host.table = true, "10.0.0.1/28", true, true
	host.mu.Unlock()
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte(env.doc(env.jailer(t, ""), ", autoProvisionHost: false")))
	must(t, err)
	must(t, f.m.Reload(cfg))
	if err := f.fc.HostError(); err != nil {
		t.Fatalf("host still not ready after reload: %v", err)
	}
	if st := states(); st["firecracker"] != "active: " {
		t.Fatalf("firecracker scaler after the fix: %q, want active", st["firecracker"])
	}
}

func TestFirecrackerAutoProvisionFailureDegrades(t *testing.T) {
	env := newFCEnv(t)
	host := newFakeHost("kici-brt")
	host.failOn = "ip link add name kici-brt"
	f := newFCFixture(t, env, env.doc(env.jailer(t, ""), ""), host, 10*time.Second)
	if err := f.fc.HostError(); err == nil || !strings.Contains(err.Error(), "create bridge kici-brt") {
		t.Fatalf("HostError %v", err)
	}
}
