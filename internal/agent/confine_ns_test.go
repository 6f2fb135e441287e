package agent

import (
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/agent/runner"
)

// TestTryNamespacesRules: a relative hide path is refused; an agent whose
// steps run as a step user, or one given nothing to hide, keeps its
// supervisor and (for the latter) its warning, which names the setting.
func TestTryNamespacesRules(t *testing.T) {
	sup := []string{"/usr/bin/kici-agent", runner.SupervisorArg}
	unconfined, err := ResolveConfinement(nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unconfined.TryNamespaces(sup, []string{EnvHidePaths + "=data"}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("relative hide path: err %v, want it refused", err)
	}
	got, err := unconfined.TryNamespaces(sup, nil)
	if err != nil || !reflect.DeepEqual(got, sup) || !unconfined.Loud || unconfined.RefuseUntrusted == "" ||
		!strings.Contains(unconfined.Summary, EnvHidePaths) {
		t.Errorf("nothing to hide: %v %v %+v, want unchanged, still refusing, naming %s", got, err, unconfined, EnvHidePaths)
	}
	asStepUser := &Confinement{StepUser: &runner.StepUser{UID: 999, GID: 999}, Summary: "steps run as 999"}
	got, err = asStepUser.TryNamespaces(sup, []string{EnvHidePaths + "=/data"})
	if err != nil || !reflect.DeepEqual(got, sup) {
		t.Errorf("step user: %v %v, want the supervisor unchanged", got, err)
	}
}
