package e2e

import (
	"encoding/json"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/forgefake"
	"kici.dev/kici/internal/testutil/wait"
)

// vmWorkflow runs ./job.sh of the pushed commit in a job VM, with a secret.
const vmWorkflow = `name: vm
on: {push: {branches: [main]}}
jobs:
  guest:
    runsOn: vm
    contexts: [vm]
    steps:
      - name: job
        secrets:
          S: vm:token
        run: sh ./job.sh
`

// vmImage builds the guest image (kernel and initramfs, scripts/vm-image.sh)
// from this test run's binaries into a directory QEMU's user can read.
func vmImage(t *testing.T) (kernel, initrd string) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("qemu-system-x86_64 is missing: apt-get install qemu-system-x86 (make test's deps step does)")
	}
	out := hostDir(t)
	cmd := exec.Command("bash", "../scripts/vm-image.sh", out)
	cmd.Env = append(os.Environ(), "KICI_BIN_DIR="+binDir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/vm-image.sh: %v\n%s", err, b)
	}
	return filepath.Join(out, "vmlinuz"), filepath.Join(out, "initramfs.cpio")
}

// gitHTTPServer serves the repositories under root over git's smart HTTP
// on loopback.
func gitHTTPServer(t *testing.T, root string) *httptest.Server {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Dir: root,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(backend)
	t.Cleanup(srv.Close)
	return srv
}

// qemuScalers is a scalers.yaml of one qemu scaler, name, of at most two
// guests (1 vCPU, 512 MiB) booted from kernel and initrd with their state
// under vmDir, allowed to reach the host's gitPort; extra adds lines,
// indented four spaces, to the scaler's entry.
func qemuScalers(name, kernel, initrd, vmDir, gitPort, extra string) string {
	return fmt.Sprintf(`version: 1
scalers:
  - name: %s
    type: qemu
    maxAgents: 2
    kernelPath: %s
    initrdPath: %s
    vmDir: %s
    vcpuCount: 1
    memSizeMib: 512
    hostPorts: [%s]
%s    labelSets:
      - labels: [vm]
`, name, kernel, initrd, vmDir, gitPort, extra)
}

// vmRecordPid reads the QEMU pid of agent's VM from its record.
func vmRecordPid(t *testing.T, vmDir, agent string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vmDir, agent, "kici-vm.json"))
	if err != nil {
		t.Fatalf("VM record of %s: %v", agent, err)
	}
	var r struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Pid <= 0 {
		t.Fatalf("VM record of %s: %s", agent, b)
	}
	return r.Pid
}

// TestVMJobsRunInQEMUGuests runs jobs in real virtual machines through the
// qemu scaler (software emulation here): a job checks out its repository
// over HTTP inside the guest, sees the guest's kernel and its secret but
// neither the host's processes nor its files; a job cancelled mid-step
// loses its VM within the grace; a VM whose QEMU is killed fails its job
// with the reason. Nothing of any VM is left behind.
func TestVMJobsRunInQEMUGuests(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the qemu scaler runs QEMU as another user: needs root (as in CI here)")
	}
	kernel, initrd := vmImage(t)
	const secret = "vm-secret-7d1e0c"
	hostMarker := filepath.Join(hostDir(t), "host-only-file")
	write(t, hostMarker, "host\n")
	sleeper := exec.Command("sleep", "4242")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })

	repo := repoWithWorkflows(t, map[string]string{"vm.yaml": vmWorkflow})
	write(t, filepath.Join(repo, "job.sh"), fmt.Sprintf(`echo "kernel $(uname -r)"
echo "checked out: $(cat README.vm)"
test "$S" = %q && echo "secret received"
echo "the secret is $S"
if test -e %s; then echo "HOST FILE VISIBLE"; else echo "host file not visible"; fi
if ps | grep -v grep | grep -q 'sleep 4242'; then echo "HOST PROCESS VISIBLE"; else echo "host process not visible"; fi
`, secret, hostMarker))
	write(t, filepath.Join(repo, "README.vm"), "vm-readme-contents\n")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "vm job")
	srv := gitHTTPServer(t, forgeGitRoot(t, repo))
	srvURL, _ := url.Parse(srv.URL)

	vmDir := filepath.Join(hostDir(t), "vms")
	cfg := filepath.Join(t.TempDir(), "scalers.yaml")
	write(t, cfg, qemuScalers("vm-e2e", kernel, initrd, vmDir, srvURL.Port(), "    maxConcurrentSpawns: 2\n"))
	o := startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+cfg, loopbackSourcesEnv)
	o.admin(t, "context", "create", "--org", "acme", "--name", "vm")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "vm", "--scope", "vm")
	o.adminIn(t, secret+"\n", "secret", "set", "--org", "acme", "vm", "token", "--from-stdin")
	forge := newFakeForgeRepo(t, o, forgefake.GitLab, srv.URL+"/{repo}")

	// 1. A job in a guest.
	start := time.Now()
	runID := o.runOf(t, forge.push(t, repo))
	r := o.waitRunStatus(t, runID, 4*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["guest"]
	log := o.logText(t, runID, job.JobID, 0)
	setup := o.logText(t, runID, job.JobID, -1)
	if r.Status != "success" {
		t.Fatalf("run %s (%s)\nstep log:\n%s\nsetup log:\n%s", r.Status, job.ErrorMessage, log, setup)
	}
	t.Logf("trigger → job success in a TCG guest: %s", time.Since(start).Round(time.Millisecond))
	hostKernel, _ := exec.Command("uname", "-r").Output()
	guestKernel := strings.TrimSpace(strings.TrimPrefix(firstLineWith(log, "kernel "), "kernel "))
	if guestKernel == "" || guestKernel == strings.TrimSpace(string(hostKernel)) || !strings.HasSuffix(guestKernel, "-amd64") {
		t.Errorf("guest kernel %q (host %q): want Debian's kernel of the image", guestKernel, strings.TrimSpace(string(hostKernel)))
	}
	for _, want := range []string{"checked out: vm-readme-contents", "secret received", "the secret is ***",
		"host file not visible", "host process not visible"} {
		if !strings.Contains(log, want) {
			t.Errorf("step log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, secret) {
		t.Errorf("step log shows the secret:\n%s", log)
	}
	if !strings.Contains(setup, "booting (QEMU microvm, tcg") && !strings.Contains(setup, "booting (QEMU microvm, kvm") {
		t.Errorf("setup log does not say the job's VM booted:\n%s", setup)
	}
	wait.For(t, 30*time.Second, "the first VM's directory to be removed", func() bool { return vmDirEmpty(vmDir) })

	// 2 and 3. Two jobs that sleep: one cancelled, one whose QEMU is killed.
	write(t, filepath.Join(repo, "job.sh"), "echo started; sleep 300\n")
	git(t, repo, "commit", "-qam", "sleep")
	cancelRun := o.runOf(t, forge.push(t, repo))
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "sleep again")
	killRun := o.runOf(t, forge.push(t, repo))
	started := func(runID string) (agent string) {
		wait.For(t, 4*time.Minute, "run "+runID+"'s step to start in its VM", func() bool {
			j := o.jobsOf(t, runID)["guest"]
			if j.JobID == "" || !strings.Contains(o.logText(t, runID, j.JobID, 0), "started") {
				return false
			}
			agent = j.AgentID
			return agent != ""
		})
		return agent
	}
	cancelAgent, killAgent := started(cancelRun), started(killRun)
	cancelPid, killPid := vmRecordPid(t, vmDir, cancelAgent), vmRecordPid(t, vmDir, killAgent)

	o.admin(t, "runs", "cancel", cancelRun)
	if r := o.waitRunStatus(t, cancelRun, time.Minute, "cancelled", "failed", "success"); r.Status != "cancelled" {
		t.Errorf("cancelled run ended %s", r.Status)
	}
	wait.For(t, 20*time.Second, "the cancelled job's QEMU to end", func() bool { return syscall.Kill(cancelPid, 0) != nil })

	if err := syscall.Kill(killPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	kr := o.waitRunStatus(t, killRun, 2*time.Minute, "failed", "cancelled", "success")
	// The job fails on whichever the orchestrator hears first: the agent's
	// connection closing with QEMU, or the scaler's report that QEMU ended
	// (after it removed the VM's directory). When the connection wins, the
	// report reaches the job's setup log a moment after the run ended.
	var kj jobRow
	reported := wait.Until(30*time.Second, func() bool {
		kj = o.jobsOf(t, killRun)["guest"]
		return strings.Contains(kj.ErrorMessage+o.logText(t, killRun, kj.JobID, -1), "VM ended")
	})
	if kr.Status != "failed" || !reported {
		t.Errorf("run whose QEMU was killed: %s, job error %q; setup log:\n%s", kr.Status, kj.ErrorMessage, o.logText(t, killRun, kj.JobID, -1))
	}
	wait.For(t, 30*time.Second, "every VM's directory to be removed", func() bool { return vmDirEmpty(vmDir) })
	// A guest that restarts instead of powering off is destroyed 10 s after
	// its agent disconnected (the backstop of docs/scaling.md).
	qemuLeft := func() string {
		out, _ := exec.Command("pgrep", "-f", "qemu-system-x86_64 -name scaler-").Output()
		return strings.TrimSpace(string(out))
	}
	wait.For(t, 30*time.Second, "no QEMU process of a job VM left", func() bool { return qemuLeft() == "" })
}

// vmDirEmpty reports whether no VM directory is left in dir (the probe's
// is not a VM's).
func vmDirEmpty(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".probe-") {
			return false
		}
	}
	return true
}

// firstLineWith is the first line of s containing sub, or "".
func firstLineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, sub); i >= 0 {
			return l[i:]
		}
	}
	return ""
}
