package kubernetes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/testutil/wait"
)

// These tests drive the backend through client-go's in-memory API
// (objects, watches, patches); the pod states a kubelet and a scheduler
// would write are written by the test. The same behaviour against a real
// control plane is tested behind the k8s build tag (cluster_test.go).

// recorder collects what the backend reports.
type recorder struct {
	mu      sync.Mutex
	exits   map[string]error
	events  []string
	pending []string
}

func newRecorder() *recorder { return &recorder{exits: map[string]error{}} }

func (r *recorder) exited(id string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exits[id] = err
}

func (r *recorder) exit(id string) (error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err, ok := r.exits[id]
	return err, ok
}

func (r *recorder) sawEvent(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e string) bool { return strings.Contains(e, sub) })
}

func (r *recorder) sawPending(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.pending, func(e string) bool { return strings.Contains(e, sub) })
}

func (r *recorder) request(id string) *scaler.SpawnRequest {
	req := spawnRequest()
	req.AgentID = id
	req.Emit = func(t scaler.EventType, d string) {
		r.mu.Lock()
		r.events = append(r.events, string(t)+" "+d)
		r.mu.Unlock()
	}
	req.Pending = func(reason string) {
		r.mu.Lock()
		r.pending = append(r.pending, reason)
		r.mu.Unlock()
	}
	return req
}

func managed(name, scalerName, agentID string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "ci",
		Labels:      map[string]string{scaler.LabelManaged: "true", scaler.LabelScalerName: scalerName, scaler.LabelAgentID: agentID},
		Annotations: map[string]string{AnnotationAgentID: agentID}}
}

func newBackend(t *testing.T, cs *fake.Clientset, r *recorder) *Backend {
	t.Helper()
	e := &scaler.Entry{Name: "pods", Type: scaler.TypeKubernetes}
	e.Namespace = "ci"
	b, err := New(e, Options{Client: apiOf(cs), StopGrace: time.Second}, r.exited)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

// setStatus writes pod name's status as the kubelet or scheduler would.
func setStatus(t *testing.T, cs *fake.Clientset, name string, st corev1.PodStatus) {
	t.Helper()
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods("ci").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = st
	if _, err := cs.CoreV1().Pods("ci").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func running(main string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: main,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
}

func exists(cs *fake.Clientset, kind, name string) bool {
	var err error
	if kind == "pod" {
		_, err = cs.CoreV1().Pods("ci").Get(context.Background(), name, metav1.GetOptions{})
	} else {
		_, err = cs.CoreV1().Secrets("ci").Get(context.Background(), name, metav1.GetOptions{})
	}
	return !apierrors.IsNotFound(err)
}

func TestOrphansDeletedAtConstruction(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Pod{ObjectMeta: managed("scaler-kubernetes-dead0001", "pods", "scaler-kubernetes-dead0001")},
		&corev1.Secret{ObjectMeta: managed("scaler-kubernetes-dead0001-token", "pods", "scaler-kubernetes-dead0001")},
		&corev1.Pod{ObjectMeta: managed("scaler-kubernetes-other001", "other-scaler", "scaler-kubernetes-other001")},
	)
	r := newRecorder()
	b := newBackend(t, cs, r)
	if exists(cs, "pod", "scaler-kubernetes-dead0001") || exists(cs, "secret", "scaler-kubernetes-dead0001-token") {
		t.Error("the orphaned pod or its Secret survived the start")
	}
	if !exists(cs, "pod", "scaler-kubernetes-other001") {
		t.Error("another scaler's pod was deleted")
	}
	if lost := b.LostAtStart(); !slices.Equal(lost, []string{"scaler-kubernetes-dead0001"}) {
		t.Errorf("LostAtStart = %v", lost)
	}
	if lost := b.LostAtStart(); len(lost) != 0 {
		t.Errorf("second LostAtStart = %v, want nothing", lost)
	}
}

func TestSpawnWaitsUnschedulableThenRunsAndDestroyDeletes(t *testing.T) {
	cs := fake.NewClientset()
	r := newRecorder()
	b := newBackend(t, cs, r)
	id := "scaler-kubernetes-00000001"
	spawned := make(chan error, 1)
	go func() { spawned <- b.Spawn(context.Background(), r.request(id)) }()
	wait.For(t, 5*time.Second, "the pod to be created", func() bool { return exists(cs, "pod", id) })
	// The owner reference is patched in once the pod exists.
	var sec *corev1.Secret
	wait.For(t, 5*time.Second, "the Secret owned by its pod", func() bool {
		var err error
		sec, err = cs.CoreV1().Secrets("ci").Get(context.Background(), id+"-token", metav1.GetOptions{})
		return err == nil && len(sec.OwnerReferences) > 0
	})
	if string(sec.Data[TokenKey]) != testToken || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Name != id {
		t.Errorf("secret: token %q, owners %+v", sec.Data[TokenKey], sec.OwnerReferences)
	}
	setStatus(t, cs, id, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}})
	wait.For(t, 5*time.Second, "the pending reason", func() bool { return r.sawPending("pod unschedulable: 0/1 nodes are available: 1 Insufficient cpu.") })
	if !r.sawEvent("waits: pod unschedulable") {
		t.Error("the provisioning log does not say why the pod waits")
	}
	select {
	case err := <-spawned:
		t.Fatalf("Spawn returned while the pod was unschedulable: %v", err)
	default:
	}
	setStatus(t, cs, id, running(AgentContainer))
	if err := <-spawned; err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	if err := b.DestroyFor(context.Background(), id, "cancelled"); err != nil {
		t.Fatal(err)
	}
	if exists(cs, "pod", id) || exists(cs, "secret", id+"-token") {
		t.Error("pod or Secret left after Destroy")
	}
	err, ok := r.exit(id)
	if !ok || err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("exit = %v (reported %v), want the reason", err, ok)
	}
	if !r.sawEvent("deleted: cancelled") {
		t.Error("the job log does not say why the pod was deleted")
	}
}

func TestUnpullableImageFailsSpawnAndLeavesNothing(t *testing.T) {
	cs := fake.NewClientset()
	r := newRecorder()
	b := newBackend(t, cs, r)
	id := "scaler-kubernetes-00000002"
	spawned := make(chan error, 1)
	go func() { spawned <- b.Spawn(context.Background(), r.request(id)) }()
	wait.For(t, 5*time.Second, "the pod to be created", func() bool { return exists(cs, "pod", id) })
	setStatus(t, cs, id, corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: AgentContainer,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "kici:nope"`}}}}})
	err := <-spawned
	if err == nil || !strings.Contains(err.Error(), "ImagePullBackOff") {
		t.Fatalf("Spawn = %v, want the pull failure", err)
	}
	if exists(cs, "pod", id) || exists(cs, "secret", id+"-token") {
		t.Error("pod or Secret left after a failed spawn")
	}
	if _, ok := r.exit(id); ok {
		t.Error("a failed spawn was also reported as an exit")
	}
}

func TestSpawnDeadlineDeletesThePod(t *testing.T) {
	cs := fake.NewClientset()
	r := newRecorder()
	b := newBackend(t, cs, r)
	id := "scaler-kubernetes-00000003"
	ctx, cancel := context.WithCancel(context.Background())
	spawned := make(chan error, 1)
	go func() { spawned <- b.Spawn(ctx, r.request(id)) }()
	wait.For(t, 5*time.Second, "the pod to be created", func() bool { return exists(cs, "pod", id) })
	cancel()
	if err := <-spawned; !errors.Is(err, context.Canceled) {
		t.Fatalf("Spawn = %v, want cancelled", err)
	}
	if exists(cs, "pod", id) || exists(cs, "secret", id+"-token") {
		t.Error("pod or Secret left after the spawn deadline")
	}
}

func TestAgentEndReportedOnceAndPodDeleted(t *testing.T) {
	cs := fake.NewClientset()
	r := newRecorder()
	b := newBackend(t, cs, r)
	for i, c := range []struct {
		end     corev1.PodStatus
		wantErr string
		wantLog string
	}{
		{corev1.PodStatus{Phase: corev1.PodSucceeded}, "", "job finished"},
		{corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}, "Evicted", "agent lost"},
	} {
		id := "scaler-kubernetes-1000000" + string(rune('0'+i))
		spawned := make(chan error, 1)
		go func() { spawned <- b.Spawn(context.Background(), r.request(id)) }()
		wait.For(t, 5*time.Second, "the pod to be created", func() bool { return exists(cs, "pod", id) })
		setStatus(t, cs, id, running(AgentContainer))
		if err := <-spawned; err != nil {
			t.Fatal(err)
		}
		setStatus(t, cs, id, c.end)
		wait.For(t, 5*time.Second, "the end to be reported", func() bool { _, ok := r.exit(id); return ok })
		err, _ := r.exit(id)
		if (c.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: exit error %v, want %q", id, err, c.wantErr)
		}
		if exists(cs, "pod", id) || exists(cs, "secret", id+"-token") {
			t.Errorf("%s: pod or Secret left after the agent ended", id)
		}
		if !r.sawEvent(id + " deleted: " + c.wantLog) {
			t.Errorf("%s: no %q line in the job log: %v", id, c.wantLog, r.events)
		}
	}
}

func TestPodDeletedOutsideIsAgentLost(t *testing.T) {
	cs := fake.NewClientset()
	r := newRecorder()
	b := newBackend(t, cs, r)
	id := "scaler-kubernetes-00000004"
	spawned := make(chan error, 1)
	go func() { spawned <- b.Spawn(context.Background(), r.request(id)) }()
	wait.For(t, 5*time.Second, "the pod to be created", func() bool { return exists(cs, "pod", id) })
	setStatus(t, cs, id, running(AgentContainer))
	if err := <-spawned; err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("ci").Delete(context.Background(), id, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the loss to be reported", func() bool { _, ok := r.exit(id); return ok })
	if err, _ := r.exit(id); err == nil || !strings.Contains(err.Error(), "agent lost") {
		t.Errorf("exit = %v, want agent lost", err)
	}
	if exists(cs, "secret", id+"-token") {
		t.Error("the token Secret outlived its pod")
	}
}

func TestShutdownDeletesEveryPod(t *testing.T) {
	cs := fake.NewClientset()
	r := newRecorder()
	b := newBackend(t, cs, r)
	ids := []string{"scaler-kubernetes-20000000", "scaler-kubernetes-20000001"}
	for _, id := range ids {
		spawned := make(chan error, 1)
		go func() { spawned <- b.Spawn(context.Background(), r.request(id)) }()
		wait.For(t, 5*time.Second, "the pod to be created", func() bool { return exists(cs, "pod", id) })
		setStatus(t, cs, id, running(AgentContainer))
		if err := <-spawned; err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.Shutdown(ctx)
	for _, id := range ids {
		if exists(cs, "pod", id) || exists(cs, "secret", id+"-token") {
			t.Errorf("%s left after Shutdown", id)
		}
		if _, ok := r.exit(id); !ok {
			t.Errorf("%s: end not reported", id)
		}
	}
	if err := b.Spawn(context.Background(), r.request("scaler-kubernetes-20000002")); err == nil {
		t.Error("Spawn after Shutdown succeeded")
	}
}

// A failure seen only as a Warning event on the pod (here a volume that
// cannot mount) becomes the job's pending reason while the spawn waits.
func TestWarningEventShownWhileWaiting(t *testing.T) {
	cs := fake.NewClientset()
	r := newRecorder()
	b := newBackend(t, cs, r)
	id := "scaler-kubernetes-00000005"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spawned := make(chan error, 1)
	go func() { spawned <- b.Spawn(ctx, r.request(id)) }()
	wait.For(t, 5*time.Second, "the pod to be created", func() bool { return exists(cs, "pod", id) })
	pod, err := cs.CoreV1().Pods("ci").Get(context.Background(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: id + ".1", Namespace: "ci"}, Type: corev1.EventTypeWarning,
		Reason: "FailedMount", Message: `MountVolume.SetUp failed for volume "token"`,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: id, Namespace: "ci", UID: pod.UID}, LastTimestamp: metav1.Now()}
	if _, err := cs.CoreV1().Events("ci").Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 3*eventPoll, "the event as the pending reason", func() bool { return r.sawPending("event FailedMount: MountVolume.SetUp failed") })
	cancel()
	<-spawned
}
