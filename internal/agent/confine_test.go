package agent

import (
	"strings"
	"testing"
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
