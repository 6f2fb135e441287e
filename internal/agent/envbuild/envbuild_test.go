package envbuild

import (
	"slices"
	"strings"
	"testing"
)

func TestBuildLayersAndAllowlist(t *testing.T) {
	env := Build(Layers{
		Host:      []string{"PATH=/usr/bin", "HOME=/root", "GOCACHE=/c", "AWS_SECRET=x", "KICI_AGENT_TOKEN=kat_x", "KICI_ORCHESTRATOR_URL=ws://x", "LANG=C"},
		Dispatch:  map[string]string{"KICI_JOB_ID": "j", "CI": "true", "LANG": "dispatch"},
		Workspace: "/w/src",
		Extra:     map[string]string{"TMPDIR": "/w/tmp"},
		Job:       map[string]string{"A": "job", "B": "job", "KICI_AGENT_TOKEN": "author"},
		Step:      map[string]string{"B": "step", "BAD=NAME": "x"},
	})
	want := []string{"A=job", "B=step", "CI=true", "GOCACHE=/c", "HOME=/root", "KICI_JOB_ID=j", "KICI_WORKSPACE=/w/src", "LANG=dispatch", "PATH=/usr/bin", "TMPDIR=/w/tmp"}
	if !slices.Equal(env, want) {
		t.Errorf("env =\n%v\nwant\n%v", env, want)
	}
}

// Context variables sit above the KICI_* job variables and below the job's
// and step's own env (KiCI's layer order).
func TestContextVariablesLayer(t *testing.T) {
	env := Build(Layers{
		Dispatch: map[string]string{"KICI_RUN_ID": "r1", "REGION": "from-dispatch"},
		Context:  map[string]string{"REGION": "eu", "TIER": "gold", "OWN": "ctx"},
		Job:      map[string]string{"TIER": "job"},
		Step:     map[string]string{"OWN": "step"},
	})
	want := []string{"KICI_RUN_ID=r1", "OWN=step", "REGION=eu", "TIER=job"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Fatalf("env %v, want %v", env, want)
	}
}
