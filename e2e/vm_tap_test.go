package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// vmTapWorkflow shows the guest's network; no checkout (the guest on the
// bridge reaches only the orchestrator).
const vmTapWorkflow = `name: vmtap
on: {push: {branches: [main]}}
jobs:
  guest:
    runsOn: vm
    checkout: false
    steps:
      - name: net
        run: |
          ip -4 addr show eth0
          ip route
          echo "guest network shown"
          sleep 4
`

// hostLink is what `ip -j link show` says of one interface.
type hostLink struct {
	Name   string   `json:"ifname"`
	Flags  []string `json:"flags"`
	Master string   `json:"master"`
	Alias  string   `json:"ifalias"`
}

// bridgePorts lists the interfaces whose master is bridge.
func bridgePorts(t *testing.T, bridge string) []hostLink {
	t.Helper()
	out, err := exec.Command("ip", "-j", "link", "show", "master", bridge).Output()
	if err != nil {
		return nil
	}
	var ls []hostLink
	if err := json.Unmarshal(out, &ls); err != nil {
		t.Fatalf("ip -j link show master %s: %v: %s", bridge, err, out)
	}
	return ls
}

// TestVMOverBridgeTap boots a real guest on the Firecracker bridge
// contract: a qemu scaler with network: tap gets a TAP on a real bridge
// (tagged, up, an isolated port), an address of the subnet with the
// bridge as its default route, and one nftables rule letting it reach the
// orchestrator, which it dials at the bridge's address; its job succeeds
// and once it ends the TAP and the rule are gone.
func TestVMOverBridgeTap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creates a bridge and TAPs and runs QEMU as another user: needs root (as in CI here)")
	}
	kernel, initrd := vmImage(t)
	var b [2]byte
	_, _ = rand.Read(b[:])
	sfx := fmt.Sprintf("%02x%02x", b[0], b[1])
	bridge, table := "kicitest-br"+sfx, "kicitest_"+sfx
	cidr, gw := fmt.Sprintf("10.242.%d.0/28", b[0]), fmt.Sprintf("10.242.%d.1", b[0])
	t.Cleanup(func() {
		for _, l := range bridgePorts(t, bridge) {
			_ = exec.Command("ip", "link", "del", "dev", l.Name).Run()
		}
		_ = exec.Command("ip", "link", "del", "dev", bridge).Run()
		_ = exec.Command("nft", "delete", "table", "inet", table).Run()
	})
	// The operator's part: the bridge with its address, so the
	// orchestrator can listen there; the backend adds the nftables table.
	for _, argv := range [][]string{
		{"ip", "link", "add", "name", bridge, "type", "bridge"},
		{"ip", "addr", "add", gw + "/28", "dev", bridge},
		{"ip", "link", "set", "dev", bridge, "up"},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	repo := repoWithWorkflows(t, map[string]string{"vmtap.yaml": vmTapWorkflow})
	vmDir := filepath.Join(hostDir(t), "vms")
	cfg := filepath.Join(t.TempDir(), "scalers.yaml")
	write(t, cfg, fmt.Sprintf(`version: 1
scalers:
  - name: vm-tap
    type: qemu
    network: tap
    maxAgents: 1
    kernelPath: %s
    initrdPath: %s
    vmDir: %s
    vcpuCount: 1
    memSizeMib: 512
    labelSets:
      - labels: [vm]
firecracker: { cidr: %s, bridgeName: %s, table: %s }
`, kernel, initrd, vmDir, cidr, bridge, table))
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_HOST="+gw)
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "vmtap", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", src, "--quiet")
	runID := o.runOf(t, delivery)

	// While the step runs: the VM's TAP on the bridge and its rule.
	var tap hostLink
	wait.For(t, 4*time.Minute, "the step to show the guest's network", func() bool {
		j := o.jobsOf(t, runID)["guest"]
		if j.JobID == "" || !strings.Contains(o.logText(t, runID, j.JobID, 0), "guest network shown") {
			return false
		}
		for _, l := range bridgePorts(t, bridge) {
			if strings.HasPrefix(l.Alias, "kici-fc:vm-tap:") {
				tap = l
			}
		}
		return true
	})
	rules, _ := exec.Command("nft", "list", "chain", "inet", table, "vms_in").CombinedOutput()
	r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["guest"]
	log := o.logText(t, runID, job.JobID, 0)
	if r.Status != "success" {
		t.Fatalf("run %s (%s)\nstep log:\n%s\nsetup log:\n%s", r.Status, job.ErrorMessage, log, o.logText(t, runID, job.JobID, -1))
	}
	if tap.Name == "" || !strings.HasPrefix(tap.Name, "kici-") || tap.Alias != "kici-fc:vm-tap:"+job.AgentID || !contains(tap.Flags, "UP") {
		t.Errorf("the VM's TAP on %s while its job ran: %+v, want kici-<8 hex>, UP, tagged kici-fc:vm-tap:%s", bridge, tap, job.AgentID)
	}
	prefix := fmt.Sprintf("inet 10.242.%d.", b[0])
	if !strings.Contains(log, prefix) || !strings.Contains(log, "/28") || !strings.Contains(log, "default via "+gw) {
		t.Errorf("the guest's network: want an address of %s and a default route via %s:\n%s", cidr, gw, log)
	}
	if !strings.Contains(string(rules), "comment \"kici-fc:vm-tap:"+job.AgentID+"\"") {
		t.Errorf("vms_in while the job ran lacks the VM's rule:\n%s", rules)
	}
	wait.For(t, 30*time.Second, "the VM, its TAP and its rule to be removed", func() bool {
		out, _ := exec.Command("nft", "list", "chain", "inet", table, "vms_in").CombinedOutput()
		return vmDirEmpty(vmDir) && len(bridgePorts(t, bridge)) == 0 && !strings.Contains(string(out), "kici-fc:vm-tap:")
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
