package cli

import (
	"net/http/httptest"
	"strings"
	"testing"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/scaler"
)

// `scaler list` shows each VM scaler's acceleration and probe boot time
// (a dash for other scalers), says loudly when VMs run under software
// emulation and why, and prints a degraded scaler's reason.
func TestScalerListShowsVMAccelAndBootTime(t *testing.T) {
	h := newHarness(t)
	st := scaler.Status{GlobalMaxAgents: 10, Scalers: []scaler.ScalerStatus{
		{Name: "vm-tcg", Type: "qemu", State: scaler.ScalerActive, Accel: scaler.AccelUsingTCG, BootMs: 6912,
			AccelNote: "qemu-system-x86_64: failed to set MSR 0x10a", LabelSets: [][]string{{"vm"}}, Agents: []scaler.AgentStatus{}},
		{Name: "vm-forced", Type: "qemu", State: scaler.ScalerActive, Accel: scaler.AccelForcedTCG, BootMs: 7050, Agents: []scaler.AgentStatus{}},
		{Name: "vm-broken", Type: "qemu", State: scaler.ScalerDegraded, StateReason: "a probe boot failed: could not load kernel",
			Accel: scaler.AccelNone, Agents: []scaler.AgentStatus{}},
		{Name: "metal", Type: "bare-metal", State: scaler.ScalerActive, Agents: []scaler.AgentStatus{}},
	}}
	srv := httptest.NewServer(api.NewRouter(api.Deps{Store: h.st, Auth: auth.NewAdminAuth(h.st, nil),
		ScalerStatus: func() scaler.Status { return st }}))
	t.Cleanup(srv.Close)
	env := map[string]string{"KICI_ADMIN_URL": srv.URL, "KICI_ADMIN_TOKEN": h.token}
	out, errs, code := h.runEnv(env, "scaler", "list")
	if code != 0 {
		t.Fatalf("scaler list: exit %d %s", code, errs)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && rows[f[0]] == nil {
			rows[f[0]] = f
		}
	}
	if h := rows["NAME"]; len(h) < 5 || h[3] != "ACCEL" || h[4] != "BOOT" {
		t.Fatalf("header %q: want ACCEL and BOOT after STATE\n%s", h, out)
	}
	for name, want := range map[string][2]string{"vm-tcg": {"tcg", "6.912s"}, "vm-forced": {"forced-tcg", "7.05s"},
		"vm-broken": {"none", "-"}, "metal": {"-", "-"}} {
		if r := rows[name]; len(r) < 5 || r[3] != want[0] || r[4] != want[1] {
			t.Errorf("row %s: %q, want accel %s boot %s\n%s", name, r, want[0], want[1], out)
		}
	}
	for _, want := range []string{
		"vm-tcg: VMs run under software emulation (TCG), boot 6.912s: KVM is not usable: qemu-system-x86_64: failed to set MSR 0x10a",
		"vm-broken degraded: a probe boot failed: could not load kernel",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scaler list lacks %q:\n%s", want, out)
		}
	}
	json, _, _ := h.runEnv(env, "scaler", "list", "--json")
	if !strings.Contains(json, `"accel": "tcg"`) || !strings.Contains(json, `"bootMs": 6912`) {
		t.Errorf("scaler list --json lacks accel and bootMs:\n%s", json)
	}
}
