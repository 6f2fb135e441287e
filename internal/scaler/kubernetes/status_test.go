package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestStateOfPod(t *testing.T) {
	waiting := func(reason, msg string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}
	}
	for _, c := range []struct {
		name    string
		status  corev1.PodStatus
		check   func(podState) bool
		explain string
	}{
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}}},
			func(s podState) bool {
				return strings.HasPrefix(s.pending, "pod unschedulable: 0/1 nodes") && s.fatal == "" && !s.running
			}, "waits with the scheduler's message"},
		{"pull retried", waiting("ErrImagePull", "not found"), func(s podState) bool { return strings.Contains(s.pending, "ErrImagePull") && s.fatal == "" }, "pending"},
		{"pull backoff", waiting("ImagePullBackOff", "Back-off pulling image"), func(s podState) bool { return strings.Contains(s.fatal, "ImagePullBackOff") }, "fatal"},
		{"bad name", waiting("InvalidImageName", ""), func(s podState) bool { return s.fatal != "" }, "fatal"},
		{"root image", waiting("CreateContainerConfigError", "container has runAsNonRoot and image will run as root"),
			func(s podState) bool { return strings.Contains(s.fatal, "runAsNonRoot") }, "fatal"},
		{"creating", waiting("ContainerCreating", ""), func(s podState) bool { return s == podState{} }, "nothing to say"},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}, func(s podState) bool { return s.running }, "running"},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded}, func(s podState) bool { return s.ended && s.err == nil }, "clean end"},
		{"oom", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}},
			func(s podState) bool { return s.ended && s.err != nil && strings.Contains(s.err.Error(), "OOMKilled") }, "failed with the reason"},
		{"main over, sidecars stopping", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}},
			func(s podState) bool { return s.ended && s.err == nil }, "ended"},
	} {
		pod := &corev1.Pod{Status: c.status}
		if st := stateOf(pod, "agent"); !c.check(st) {
			t.Errorf("%s: state %+v, want %s", c.name, st, c.explain)
		}
	}
}
