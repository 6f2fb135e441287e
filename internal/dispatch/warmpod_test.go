package dispatch

import (
	"slices"
	"testing"

	"kici.dev/kici/internal/protocol"
)

// A job that needs a pod made for it (its own image, its services) must
// not go to a warm pod of a kubernetes scaler; any other job may, and a
// job's own exclude matchers are kept.
func TestJobContainersExcludeWarmPods(t *testing.T) {
	for _, c := range []struct {
		name, config string
		want         []string
	}{
		{"plain job", `{"name":"build"}`, nil},
		{"container", `{"name":"build","container":{"image":"golang:1.26"}}`, []string{protocol.LabelWarmPod}},
		{"services only", `{"name":"build","services":[{"name":"db","image":"postgres:17"}]}`, []string{protocol.LabelWarmPod}},
		{"null container", `{"name":"build","container":null}`, nil},
		{"own excludes kept", `{"excludeLabels":[{"kind":"exact","value":"slow"},{"kind":"regex","value":"^x"}],"container":{"image":"alpine"}}`,
			[]string{"slow", protocol.LabelWarmPod}},
	} {
		if got := excludeLabels([]byte(c.config)); !slices.Equal(got, c.want) {
			t.Errorf("%s: exclude %v, want %v", c.name, got, c.want)
		}
	}
	warm := []string{"pod", protocol.LabelWarmPod, "kici:os:linux"}
	if labelsMatch(warm, []string{"pod"}, excludeLabels([]byte(`{"container":{"image":"alpine"}}`))) {
		t.Error("a container job matched a warm pod")
	}
	if !labelsMatch(warm, []string{"pod"}, excludeLabels([]byte(`{"name":"plain"}`))) {
		t.Error("a plain job did not match a warm pod")
	}
}
