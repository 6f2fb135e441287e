package kubernetes

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podState is what the backend makes of a pod's status (Kubernetes
// core/v1 PodStatus).
type podState struct {
	// running: the main container (agent or job) runs.
	running bool
	// ended: the pod (or its main container) is over; err says why when
	// it was not a clean exit.
	ended bool
	err   error
	// pending is why the pod is not running yet, shown as the job's
	// pending reason ("" when nothing is wrong, e.g. pulling).
	pending string
	// fatal is a reason the pod cannot start from (a bad image name, an
	// image pull that failed and backs off, a container the runtime
	// cannot create): the spawn fails with it.
	fatal string
}

// fatalWaiting are the container waiting reasons (kubelet) a pod does not
// recover from by itself within a spawn deadline.
var fatalWaiting = map[string]bool{
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// pendingWaiting are waiting reasons shown while the kubelet retries.
var pendingWaiting = map[string]bool{
	"ErrImagePull": true,
}

// stateOf classifies pod, whose main container is named main.
func stateOf(pod *corev1.Pod, main string) podState {
	var st podState
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return podState{ended: true}
	case corev1.PodFailed:
		msg := "pod failed"
		if pod.Status.Reason != "" {
			msg += ": " + pod.Status.Reason
		}
		if pod.Status.Message != "" {
			msg += ": " + pod.Status.Message
		}
		if t := terminated(pod, main); t != nil {
			msg += fmt.Sprintf(" (%s exited with status %d%s)", main, t.ExitCode, suffix(t.Reason))
		}
		return podState{ended: true, err: fmt.Errorf("%s", msg)}
	}
	if pod.DeletionTimestamp != nil {
		// Being deleted: it ends; the delete event reports it.
		return st
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			st.pending = "pod unschedulable: " + oneLine(c.Message)
			return st
		}
	}
	for _, cs := range allStatuses(pod) {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		why := fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, oneLine(w.Message))
		switch {
		case fatalWaiting[w.Reason]:
			st.fatal = why
			return st
		case pendingWaiting[w.Reason]:
			st.pending = why
		}
	}
	if t := terminated(pod, main); t != nil {
		// The pod may stay Running while sidecars stop; the agent is over.
		st.ended = true
		if t.ExitCode != 0 {
			st.err = fmt.Errorf("%s exited with status %d%s", main, t.ExitCode, suffix(t.Reason))
		}
		return st
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == main && cs.State.Running != nil {
			st.running = true
		}
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			st.fatal = fmt.Sprintf("init container %s exited with status %d%s", cs.Name, t.ExitCode, suffix(t.Reason))
		}
	}
	return st
}

func allStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
}

func terminated(pod *corev1.Pod, main string) *corev1.ContainerStateTerminated {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == main && cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	return nil
}

func suffix(reason string) string {
	if reason == "" || reason == "Completed" || reason == "Error" {
		return ""
	}
	return ", " + reason
}

// oneLine keeps a Kubernetes message to one bounded line for the job's
// pending reason.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
