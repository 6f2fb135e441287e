package agent

import (
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/agent/runner"
)

func TestResolveConfinement(t *testing.T) {
	// Not root: steps run as the agent's user; untrusted jobs are refused
	// unless the operator opts in.
	c, err := ResolveConfinement(nil, 1000)
	if err != nil || c.StepUser != nil || !c.Loud || !strings.Contains(c.RefuseUntrusted, EnvAllowUnconfined+"=true") {
		t.Fatalf("non-root default: %+v %v", c, err)
	}
	c, err = ResolveConfinement([]string{EnvAllowUnconfined + "=true"}, 1000)
	if err != nil || c.RefuseUntrusted != "" || !c.Loud {
		t.Fatalf("non-root opted in: %+v %v", c, err)
	}
	if _, err := ResolveConfinement([]string{EnvStepUser + "=nobody"}, 1000); err == nil {
		t.Fatal("a step user without root was accepted")
	}
	if _, err := ResolveConfinement([]string{EnvAllowUnconfined + "=maybe"}, 0); err == nil {
		t.Fatal("a malformed opt-in was accepted")
	}
	// Root: KICI_STEP_USER=root keeps steps as root, loudly.
	c, err = ResolveConfinement([]string{EnvStepUser + "=root"}, 0)
	if err != nil || c.StepUser != nil || c.RefuseUntrusted == "" {
		t.Fatalf("root opted out: %+v %v", c, err)
	}
	// Root with a numeric identity; uid 0 spelled as a number is refused.
	c, err = ResolveConfinement([]string{EnvStepUser + "=4242:4243"}, 0)
	if err != nil || c.StepUser == nil || c.StepUser.UID != 4242 || c.StepUser.GID != 4243 || c.RefuseUntrusted != "" || c.Loud {
		t.Fatalf("numeric step user: %+v %v", c, err)
	}
	if _, err := ResolveConfinement([]string{EnvStepUser + "=0:0"}, 0); err == nil {
		t.Fatal("uid 0 accepted as a step user")
	}
	if _, err := ResolveConfinement([]string{EnvStepUser + "=no-such-account-kici"}, 0); err == nil {
		t.Fatal("an unknown account was accepted")
	}
}

// TestRootAgentGivesEachJobItsOwnUID: as root without KICI_STEP_USER each
// job gets a uid of its own from KICI_STEP_UID_RANGE (default
// runner.DefaultUIDRange); a malformed range is refused with the setting's
// name.
func TestRootAgentGivesEachJobItsOwnUID(t *testing.T) {
	c, err := ResolveConfinement(nil, 0)
	if err != nil || c.UIDs == nil || c.StepUser != nil || c.UIDs.String() != runner.DefaultUIDRange {
		t.Fatalf("root default: %+v %v", c, err)
	}
	c, err = ResolveConfinement([]string{EnvStepUIDRange + "=200000-200099"}, 0)
	if err != nil || c.UIDs == nil || c.UIDs.First != 200000 || c.UIDs.Last != 200099 {
		t.Fatalf("range: %+v %v", c, err)
	}
	if _, err := ResolveConfinement([]string{EnvStepUIDRange + "=9-1"}, 0); err == nil || !strings.Contains(err.Error(), EnvStepUIDRange) {
		t.Fatalf("bad range: %v", err)
	}
}

// TestTrySandboxRefusesUntrustedWithoutNamespaces: a root agent whose
// steps cannot get their own namespaces (no supervisor, or a host where
// the probe fails, as in an unprivileged container) says which piece is
// missing and refuses untrusted jobs unless the operator opts in. Before,
// a root agent ran fork jobs with no refusal at all.
func TestTrySandboxRefusesUntrustedWithoutNamespaces(t *testing.T) {
	for name, sup := range map[string][]string{"no supervisor": nil, "probe fails": {"/bin/false"}} {
		c, err := ResolveConfinement(nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.TryNamespaces(sup, nil)
		if err != nil || !reflect.DeepEqual(got, sup) {
			t.Errorf("%s: %v %v, want the supervisor unchanged", name, got, err)
		}
		if !c.Loud || !strings.Contains(c.RefuseUntrusted, "namespace") || !strings.Contains(c.RefuseUntrusted, EnvAllowUnconfined) {
			t.Errorf("%s: %+v, want untrusted jobs refused, naming the missing namespaces and %s", name, c, EnvAllowUnconfined)
		}
		c, _ = ResolveConfinement([]string{EnvAllowUnconfined + "=true"}, 0)
		if _, err := c.TryNamespaces(sup, nil); err != nil || c.RefuseUntrusted != "" || !c.Loud {
			t.Errorf("%s, opted in: %+v %v, want untrusted jobs run, loudly", name, c, err)
		}
	}
}

// A root agent without the capabilities to act as another user (a pod
// whose securityContext drops them) does not fail its jobs: steps run as
// root, the start-up summary says why, untrusted jobs are refused unless
// allowed; when the operator asked for a step user, start-up fails.
func TestRootWithoutCapabilitiesFallsBack(t *testing.T) {
	saved := missingStepUserCaps
	t.Cleanup(func() { missingStepUserCaps = saved })
	missingStepUserCaps = func() []string { return []string{"CAP_CHOWN", "CAP_SETUID"} }

	c, err := ResolveConfinement(nil, 0)
	if err != nil || c.UIDs != nil || c.StepUser != nil || !c.Loud ||
		!strings.Contains(c.Summary, "without CAP_CHOWN, CAP_SETUID") || !strings.Contains(c.RefuseUntrusted, EnvAllowUnconfined) {
		t.Fatalf("root without capabilities: %+v %v", c, err)
	}
	c, err = ResolveConfinement([]string{EnvAllowUnconfined + "=true"}, 0)
	if err != nil || c.UIDs != nil || c.RefuseUntrusted != "" {
		t.Fatalf("root without capabilities, unconfined allowed: %+v %v", c, err)
	}
	if _, err := ResolveConfinement([]string{EnvStepUser + "=4242"}, 0); err == nil || !strings.Contains(err.Error(), "CAP_CHOWN, CAP_SETUID") {
		t.Fatalf("a required step user without capabilities: %v", err)
	}
}

func TestMissingCaps(t *testing.T) {
	full := "Name:\tkici-agent\nCapInh:\t0000000000000000\nCapEff:\t00000000a80425fb\n" // Docker's default set
	if got := missingCaps(full); len(got) != 0 {
		t.Errorf("default container capabilities: missing %v", got)
	}
	none := "CapEff:\t0000000000000000\n"
	if got := missingCaps(none); len(got) != len(stepUserCaps) {
		t.Errorf("no capabilities: missing %v", got)
	}
	if got := missingCaps("CapEff:\t00000000000000c0\n"); !reflect.DeepEqual(got, []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL"}) {
		t.Errorf("only setuid/setgid: missing %v", got)
	}
}
