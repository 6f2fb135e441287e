package scaler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/testutil/wait"
	"kici.dev/kici/internal/vmguest"
)

// fakeQEMU writes a stand-in for qemu-system-x86_64 that answers the boot
// probe: a KVM boot fails as on this kind of nested host (kvmFails), a
// TCG boot waits for the file gate (when set), takes about 150 ms and
// prints the guest init's probe line on the serial console file; with
// allFail every boot fails.
func fakeQEMU(t *testing.T, dir, gate string, kvmFails, allFail bool) string {
	t.Helper()
	script := "#!/bin/sh\nconsole=\nkvm=\n" +
		"for a in \"$@\"; do case \"$a\" in file:*) console=${a#file:};; *accel=kvm*) kvm=1;; esac; done\n"
	if allFail {
		script += "echo 'qemu-system-x86_64: -kernel: could not load kernel' >&2; exit 1\n"
	}
	if kvmFails {
		script += "if [ -n \"$kvm\" ]; then echo 'qemu-system-x86_64: error: failed to set MSR 0x10a' >&2; exit 1; fi\n"
	}
	if gate != "" {
		script += fmt.Sprintf("while [ ! -e %q ]; do sleep 0.02; done\n", gate)
	}
	script += fmt.Sprintf("sleep 0.15\necho %q > \"$console\"\n", vmguest.ProbeOK)
	p := filepath.Join(dir, "qemu-system-x86_64")
	must(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// qemuManager runs a Manager with one qemu scaler (accel) whose QEMU is
// qemuPath, and a bare-metal one served by a fake backend.
func qemuManager(t *testing.T, dir, qemuPath, accel string) *Manager {
	t.Helper()
	return qemuManagerOn(t, dir, qemuPath, accel, "", nil)
}

// qemuManagerOn is qemuManager with extra qemu fields and a tail (a
// firecracker: block), host commands running through run.
func qemuManagerOn(t *testing.T, dir, qemuPath, accel, fields string, run HostRunner, tail ...string) *Manager {
	t.Helper()
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte(qemuScalersDoc(dir, qemuPath, accel, fields, tail...)))
	must(t, err)
	settings := &liveSettings{}
	settings.ttl.Store(int64(time.Hour))
	settings.timeout.Store(int64(5 * time.Second))
	fallback := func(e *Entry, exited func(string, error)) (Backend, error) {
		return &fakeBackend{name: e.Name, exited: exited, running: map[string]bool{}}, nil
	}
	m, err := NewManager(cfg, Options{Tokens: &fakeTokens{ttls: map[string]time.Duration{}}, Settings: settings,
		Events: &memLog{lines: map[string][]string{}}, FailureBackoff: time.Minute, OrchestratorURL: "ws://127.0.0.1:1/ws",
		Backends: WithQEMU(fallback, QEMUOptions{RelayCommand: []string{"true"}, ProbeTimeout: 10 * time.Second, Runner: run})})
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Shutdown(ctx)
	})
	return m
}

// qemuScalersDoc is the scalers.yaml of qemuManagerOn: the qemu scaler vm
// (QEMU qemuPath, its image and VMs under dir, accel, extra fields) and
// the bare-metal scaler metal, then tail.
func qemuScalersDoc(dir, qemuPath, accel, fields string, tail ...string) string {
	return fmt.Sprintf(`version: 1
scalers:
  - name: vm
    type: qemu
    maxAgents: 1
    qemuPath: %s
    kernelPath: %s/vmlinuz
    initrdPath: %s/initramfs.cpio
    vmDir: %s/vms
    accel: %s
%s    uid: %d
    gid: %d
    labelSets:
      - labels: [vm]
  - name: metal
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [plain]
%s`, qemuPath, dir, dir, dir, accel, fields, os.Getuid(), os.Getgid(), strings.Join(tail, ""))
}

func scalerNamed(m *Manager, name string) ScalerStatus {
	for _, s := range m.Status().Scalers {
		if s.Name == name {
			return s
		}
	}
	return ScalerStatus{}
}

// The scaler view (kici-admin scaler list) shows how a qemu scaler's VMs
// run and how long the probe boot took: probing while it runs, tcg with
// the KVM failure when KVM does not boot, forced-tcg when the
// configuration asks for TCG, none and degraded with QEMU's error when no
// boot succeeds. Other scalers show none of it.
func TestQEMUScalerStatusShowsAccelAndBootTime(t *testing.T) {
	t.Run("auto falls back to tcg", func(t *testing.T) {
		dir := t.TempDir()
		gate := filepath.Join(dir, "gate")
		m := qemuManager(t, dir, fakeQEMU(t, dir, gate, true, false), "auto")
		if s := scalerNamed(m, "vm"); s.Accel != AccelProbing || s.State != ScalerActive || s.BootMs != 0 {
			t.Fatalf("while the probe runs: accel %q state %q bootMs %d, want probing, active, 0", s.Accel, s.State, s.BootMs)
		}
		must(t, os.WriteFile(gate, nil, 0o644))
		wait.For(t, 5*time.Second, "the probe to end", func() bool { return scalerNamed(m, "vm").Accel != AccelProbing })
		s := scalerNamed(m, "vm")
		if s.Accel != AccelUsingTCG || s.State != ScalerActive || s.BootMs < 150 || s.BootMs > 5000 {
			t.Fatalf("after the probe: accel %q state %q bootMs %d, want tcg, active, the fake's ~150 ms", s.Accel, s.State, s.BootMs)
		}
		// Where /dev/kvm exists the fake's KVM boot fails; elsewhere
		// opening /dev/kvm does.
		if !strings.Contains(s.AccelNote, "failed to set MSR 0x10a") && !strings.Contains(s.AccelNote, "/dev/kvm") {
			t.Errorf("accelNote %q: want why KVM was not used", s.AccelNote)
		}
		if o := scalerNamed(m, "metal"); o.Accel != "" || o.BootMs != 0 {
			t.Errorf("bare-metal scaler shows accel %q bootMs %d", o.Accel, o.BootMs)
		}
	})
	t.Run("forced tcg", func(t *testing.T) {
		dir := t.TempDir()
		m := qemuManager(t, dir, fakeQEMU(t, dir, "", false, false), "tcg")
		wait.For(t, 5*time.Second, "the probe to end", func() bool { return scalerNamed(m, "vm").Accel != AccelProbing })
		if s := scalerNamed(m, "vm"); s.Accel != AccelForcedTCG || s.BootMs < 150 || s.AccelNote != "" {
			t.Fatalf("accel %q bootMs %d note %q, want forced-tcg with a boot time", s.Accel, s.BootMs, s.AccelNote)
		}
	})
	t.Run("no boot succeeds", func(t *testing.T) {
		dir := t.TempDir()
		m := qemuManager(t, dir, fakeQEMU(t, dir, "", true, true), "tcg")
		wait.For(t, 5*time.Second, "the probe to end", func() bool { return scalerNamed(m, "vm").Accel != AccelProbing })
		s := scalerNamed(m, "vm")
		if s.Accel != AccelNone || s.State != ScalerDegraded || !strings.Contains(s.StateReason, "could not load kernel") || s.BootMs != 0 {
			t.Fatalf("accel %q state %q reason %q bootMs %d, want none, degraded with QEMU's error", s.Accel, s.State, s.StateReason, s.BootMs)
		}
	})
}

// A qemu scaler on the bridge network (network: tap) whose bridge is
// missing while autoProvisionHost is false is degraded with the missing
// piece, like a firecracker scaler, even though its guests boot; it
// creates nothing on the host, and a reload once the operator fixed the
// host makes it active.
func TestQEMUTapScalerDegradedWithoutBridge(t *testing.T) {
	dir := t.TempDir()
	host := newFakeHost("kici-brq")
	tail := "firecracker: { cidr: 10.0.0.0/28, bridgeName: kici-brq, table: kici_q, autoProvisionHost: false }\n"
	m := qemuManagerOn(t, dir, fakeQEMU(t, dir, "", false, false), "tcg", "    network: tap\n", host, tail)
	wait.For(t, 5*time.Second, "the probe to end", func() bool { return scalerNamed(m, "vm").Accel != AccelProbing })
	s := scalerNamed(m, "vm")
	if s.State != ScalerDegraded || !strings.Contains(s.StateReason, "bridge network not ready: bridge kici-brq is missing and autoProvisionHost is false") ||
		s.Accel != AccelForcedTCG {
		t.Fatalf("state %q reason %q accel %q, want degraded naming the missing bridge (the boot probe itself succeeded)", s.State, s.StateReason, s.Accel)
	}
	if calls, taps, _ := host.snapshot(); len(taps) != 0 || slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "ip link add") }) {
		t.Fatalf("a verify-only scaler changed the host: %q", calls)
	}
	host.mu.Lock()
	host.brExists, host.brAddr, host.brUp, host.table = true, "10.0.0.1/28", true, true
	host.mu.Unlock()
	cfg, err := scalerconfig.Parse("scalers.yaml", []byte(qemuScalersDoc(dir, filepath.Join(dir, "qemu-system-x86_64"), "tcg", "    network: tap\n", tail)))
	must(t, err)
	must(t, m.Reload(cfg))
	if s := scalerNamed(m, "vm"); s.State != ScalerActive {
		t.Fatalf("after the operator fixed the host and reloaded: %s %q, want active", s.State, s.StateReason)
	}
}
