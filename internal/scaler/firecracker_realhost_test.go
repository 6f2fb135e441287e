package scaler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/testutil/wait"
)

// realHost is a scratch network name set on this machine: a bridge and an
// nftables table no one else uses, and a /28 for the VMs.
type realHost struct {
	bridge, table, cidr, gw string
}

// newRealHost picks unique names (kicitest-br<4 hex>, kicitest_<4 hex>)
// and removes whatever the test leaves of them when it ends. It needs
// root and iproute2 and nftables (scripts/test-deps.sh installs them).
func newRealHost(t *testing.T) *realHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creates a real bridge, TAPs and an nftables table: needs root (as in CI here)")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing: apt-get install iproute2 nftables (make test's deps step does)", bin)
		}
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	sfx := hex.EncodeToString(b[:])
	h := &realHost{bridge: "kicitest-br" + sfx, table: "kicitest_" + sfx,
		cidr: fmt.Sprintf("10.241.%d.0/28", b[0]), gw: fmt.Sprintf("10.241.%d.1", b[0])}
	t.Cleanup(func() {
		// TAPs first (a VM's TAP outlives a failed test), then the bridge
		// and the table.
		for name := range h.taps(t) {
			if l, ok := h.link(t, name); ok && l.Master == h.bridge {
				_ = exec.Command("ip", "link", "del", "dev", name).Run()
			}
		}
		_ = exec.Command("ip", "link", "del", "dev", h.bridge).Run()
		_ = exec.Command("nft", "delete", "table", "inet", h.table).Run()
	})
	return h
}

// doc is a scalers.yaml with one firecracker scaler "fc" on this network
// (the fake jailer stands in for Firecracker) and a bare-metal one.
func (h *realHost) doc(env *fcEnv, jailer string, auto bool) string {
	return fmt.Sprintf(`version: 1
scalers:
  - name: fc
    type: firecracker
    maxAgents: 4
    maxConcurrentSpawns: 4
    firecrackerPath: %s
    jailerPath: %s
    kernelPath: %s
    uid: %d
    gid: %d
    chrootBaseDir: %s
    orchestratorUrl: ws://%s:4000/ws
    labelSets:
      - labels: [vm]
        rootfsPath: %s
%s
firecracker: { cidr: %s, bridgeName: %s, table: %s, autoProvisionHost: %t }
`, env.fc, jailer, env.kernel, os.Getuid(), os.Getgid(), env.jail, h.gw, env.rootfs, extraScalers, h.cidr, h.bridge, h.table, auto)
}

// ipLink is what `ip -j -d link show` says of one interface.
type ipLink struct {
	Name     string   `json:"ifname"`
	Flags    []string `json:"flags"`
	Master   string   `json:"master"`
	Alias    string   `json:"ifalias"`
	LinkInfo struct {
		Kind      string `json:"info_kind"`
		SlaveKind string `json:"info_slave_kind"`
		SlaveData struct {
			Isolated bool `json:"isolated"`
		} `json:"info_slave_data"`
	} `json:"linkinfo"`
}

// link reads name from the kernel; ok is false when it does not exist.
func (h *realHost) link(t *testing.T, name string) (l ipLink, ok bool) {
	t.Helper()
	out, err := exec.Command("ip", "-j", "-d", "link", "show", "dev", name).Output()
	if err != nil {
		return ipLink{}, false
	}
	var ls []ipLink
	if err := json.Unmarshal(out, &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip -j link show dev %s: %v: %s", name, err, out)
	}
	return ls[0], true
}

// taps lists the host's interfaces carrying an alias: name → alias.
func (h *realHost) taps(t *testing.T) map[string]string {
	out, err := exec.Command("ip", "-j", "link", "show").Output()
	if err != nil {
		t.Errorf("ip -j link show: %v", err)
		return nil
	}
	var ls []ipLink
	_ = json.Unmarshal(out, &ls)
	m := map[string]string{}
	for _, l := range ls {
		if l.Alias != "" {
			m[l.Name] = l.Alias
		}
	}
	return m
}

// rules is the nft text of the table's vms_in chain ("" when missing).
func (h *realHost) rules(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "chain", "inet", h.table, vmsInChain).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

func (h *realHost) run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// reload re-applies doc and returns the firecracker scaler's state and
// reason as `kici-admin scaler list` shows them.
func reloadState(t *testing.T, f *fcFixture, doc string) string {
	t.Helper()
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte(doc))
	must(t, err)
	must(t, f.m.Reload(cfg))
	s := scalerNamed(f.m, "fc")
	return string(s.State) + ": " + s.StateReason
}

// On a host without the bridge, a firecracker scaler that may not
// provision the host is degraded and names the missing piece — the
// bridge, then its address, then its link state, then the nftables table
// — one after the other as the operator provides them, and is active once
// all are there; it creates nothing on the host itself.
func TestFirecrackerHostVerifyOnRealBridge(t *testing.T) {
	h := newRealHost(t)
	env := newFCEnv(t)
	doc := h.doc(env, env.jailer(t, ""), false)
	f := newFCFixture(t, env, doc, ExecRunner{}, 10*time.Second)

	s := scalerNamed(f.m, "fc")
	if s.State != ScalerDegraded || !strings.Contains(s.StateReason, "bridge "+h.bridge+" is missing and autoProvisionHost is false") {
		t.Fatalf("without the bridge: %s: %s, want degraded naming the missing bridge", s.State, s.StateReason)
	}
	if _, ok := h.link(t, h.bridge); ok {
		t.Fatalf("a verify-only scaler created bridge %s", h.bridge)
	}
	if o := scalerNamed(f.m, "other"); o.State != ScalerActive {
		t.Errorf("the other scaler is %s, want active", o.State)
	}
	_, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: "j", RunID: "r", RunsOn: []string{"vm"}})
	must(t, err)
	wait.Elapse(t.Context(), 200*time.Millisecond) // room for a TAP that must not appear
	if taps := h.taps(t); slices.ContainsFunc(mapsKeys(taps), func(n string) bool { return strings.HasPrefix(taps[n], "kici-fc:fc:") }) {
		t.Fatalf("a degraded scaler created a TAP: %v", taps)
	}

	h.run(t, "ip", "link", "add", "name", h.bridge, "type", "bridge")
	addr := h.gw + "/28"
	if st := reloadState(t, f, doc); !strings.Contains(st, "degraded: bridge "+h.bridge+" does not hold "+addr) {
		t.Fatalf("bridge without its address: %q", st)
	}
	h.run(t, "ip", "addr", "add", addr, "dev", h.bridge)
	if st := reloadState(t, f, doc); !strings.Contains(st, "degraded: bridge "+h.bridge+" is down") {
		t.Fatalf("bridge down: %q", st)
	}
	h.run(t, "ip", "link", "set", "dev", h.bridge, "up")
	if st := reloadState(t, f, doc); !strings.Contains(st, "degraded: nftables table inet "+h.table+" lacks its input baseline") {
		t.Fatalf("no nftables table: %q", st)
	}
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(f.fc.host.baselineScript())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f (the documented baseline): %v: %s", err, out)
	}
	if st := reloadState(t, f, doc); st != "active: " {
		t.Fatalf("with bridge, address, link and table in place: %q, want active", st)
	}
}

// With autoProvisionHost the backend builds the host side for real: the
// bridge with the gateway address, up, and the nftables table; each VM
// gets a TAP that is up, enslaved to the bridge as an isolated port and
// tagged, plus one rule letting its address reach the orchestrator port;
// destroying a VM removes both; the orphan sweep removes a TAP and rule a
// killed orchestrator left and keeps the live VM's; shutdown leaves no TAP.
func TestFirecrackerHostProvisionsRealBridgeAndTaps(t *testing.T) {
	h := newRealHost(t)
	env := newFCEnv(t)
	if _, ok := h.link(t, h.bridge); ok {
		t.Fatalf("bridge %s exists before the test", h.bridge)
	}
	f := newFCFixture(t, env, h.doc(env, env.jailer(t, ""), true), ExecRunner{}, 15*time.Second)
	if s := scalerNamed(f.m, "fc"); s.State != ScalerActive {
		t.Fatalf("scaler %s: %s, want active on a provisioned host", s.State, s.StateReason)
	}
	br, ok := h.link(t, h.bridge)
	if !ok || br.LinkInfo.Kind != "bridge" || !slices.Contains(br.Flags, "UP") {
		t.Fatalf("bridge %s after provisioning: exists %t, %+v", h.bridge, ok, br)
	}
	out, err := exec.Command("ip", "-4", "-o", "addr", "show", "dev", h.bridge).Output()
	if err != nil || !strings.Contains(string(out), "inet "+h.gw+"/28 ") {
		t.Fatalf("bridge address: %v %s, want %s/28", err, out, h.gw)
	}
	tbl, err := exec.Command("nft", "list", "table", "inet", h.table).CombinedOutput()
	if err != nil || !strings.Contains(string(tbl), "jump "+vmsInChain) || !strings.Contains(string(tbl), "masquerade") {
		t.Fatalf("nftables table inet %s: %v\n%s", h.table, err, tbl)
	}

	var ids []string
	for i := 0; i < 2; i++ {
		id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: fmt.Sprint("job-", i), RunID: "r", RunsOn: []string{"vm"}})
		must(t, err)
		ids = append(ids, id)
	}
	wait.For(t, 5*time.Second, "2 VMs running", func() bool { return f.agentState(ids[0]) == AgentRunning && f.agentState(ids[1]) == AgentRunning })
	addrs := f.fc.host.alloc.InUse()
	rules := h.rules(t)
	for _, id := range ids {
		tap := tapName(id)
		l, ok := h.link(t, tap)
		if !ok {
			t.Fatalf("TAP %s of %s does not exist", tap, id)
		}
		if !slices.Contains(l.Flags, "UP") || l.Master != h.bridge || l.LinkInfo.SlaveKind != "bridge" ||
			!l.LinkInfo.SlaveData.Isolated || l.Alias != vmTag("fc", id) {
			t.Errorf("TAP %s: flags %v master %q slave %q isolated %t alias %q; want UP, on %s, isolated, tagged %s",
				tap, l.Flags, l.Master, l.LinkInfo.SlaveKind, l.LinkInfo.SlaveData.Isolated, l.Alias, h.bridge, vmTag("fc", id))
		}
		want := fmt.Sprintf("ip saddr %s tcp dport 4000 accept comment %q", addrs[id], vmTag("fc", id))
		if !strings.Contains(rules, want) {
			t.Errorf("vms_in lacks %q:\n%s", want, rules)
		}
	}

	f.m.Stop(ids[0])
	wait.For(t, 5*time.Second, "the stopped VM's TAP and rule to go", func() bool {
		_, tap := h.link(t, tapName(ids[0]))
		return !tap && !strings.Contains(h.rules(t), ids[0])
	})

	// What a killed orchestrator leaves: a tagged TAP on the bridge and
	// its rule, for a VM no one tracks.
	orphan := "scaler-firecracker-0badf00d"
	ctx := context.Background()
	must(t, f.fc.host.setupTap(ctx, tapName(orphan), vmTag("fc", orphan), os.Getuid(), os.Getgid()))
	must(t, f.fc.host.allowHost(ctx, mustAddr(t, f, orphan), 4000, vmTag("fc", orphan)))
	if _, ok := h.link(t, tapName(orphan)); !ok || !strings.Contains(h.rules(t), orphan) {
		t.Fatal("the orphan's TAP and rule were not created")
	}
	n, err := f.fc.ReapOrphans(ctx)
	if err != nil || n != 2 {
		t.Fatalf("orphan sweep removed %d (%v), want the TAP and the rule", n, err)
	}
	if _, ok := h.link(t, tapName(orphan)); ok || strings.Contains(h.rules(t), orphan) {
		t.Fatalf("orphan sweep left the TAP or rule of %s:\n%s", orphan, h.rules(t))
	}
	if _, ok := h.link(t, tapName(ids[1])); !ok || !strings.Contains(h.rules(t), ids[1]) {
		t.Fatalf("orphan sweep removed the live VM %s's TAP or rule", ids[1])
	}

	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	f.m.Shutdown(sctx)
	for name, tag := range h.taps(t) {
		if strings.HasPrefix(tag, "kici-fc:fc:") {
			t.Errorf("TAP %s (%s) left after shutdown", name, tag)
		}
	}
	if r := h.rules(t); strings.Contains(r, "kici-fc:fc:") {
		t.Errorf("rules left after shutdown:\n%s", r)
	}
}

// mustAddr allocates an address for owner from the scaler's subnet.
func mustAddr(t *testing.T, f *fcFixture, owner string) netip.Addr {
	t.Helper()
	ip, err := f.fc.host.alloc.Allocate(owner)
	must(t, err)
	f.fc.host.alloc.Release(owner) // the orchestrator that held it is gone
	return ip
}
