//go:build k8s

package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/testutil/wait"
)

// These tests run against a real control plane (kube-apiserver, etcd,
// kube-scheduler, kube-controller-manager and, for the tests that need a
// pod to run, a kubelet with containerd): `make test-k8s`, which starts it
// with scripts/k8s/cluster.sh and sets KICI_TEST_KUBECONFIG.

// clusterImage is the agent image the cluster's containerd holds
// (KICI_TEST_K8S_IMAGE, default kici:dev, imported by make test-k8s).
func clusterImage() string {
	if v := os.Getenv("KICI_TEST_K8S_IMAGE"); v != "" {
		return v
	}
	return "kici:dev"
}

// clusterClient connects with KICI_TEST_KUBECONFIG and creates a fresh
// namespace, deleted when the test ends.
func clusterClient(t *testing.T) (k8s.Interface, string) {
	t.Helper()
	path := os.Getenv("KICI_TEST_KUBECONFIG")
	if path == "" {
		t.Fatal("KICI_TEST_KUBECONFIG is unset: run `make test-k8s` (or `scripts/k8s/cluster.sh up && KICI_TEST_KUBECONFIG=/var/cache/kici-k8s/run/admin.kubeconfig go test -tags k8s ./internal/scaler/kubernetes/`)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = ClientQPS, ClientBurst // as the backend's own client
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "kici-test-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods are admitted only once the namespace's default service account
	// exists; the controller manager creates it, this does not wait for it.
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return cs, ns
}

func clusterBackend(t *testing.T, cs k8s.Interface, ns string, r *recorder) *Backend {
	t.Helper()
	e := &scaler.Entry{Name: "pods", Type: scaler.TypeKubernetes}
	e.Namespace = ns
	// The backend's own client, built from the kubeconfig as in production.
	e.Kubeconfig = os.Getenv("KICI_TEST_KUBECONFIG")
	b, err := New(e, Options{StopGrace: 2 * time.Second}, r.exited)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

func gone(cs k8s.Interface, ns, pod string) bool {
	_, perr := cs.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	_, serr := cs.CoreV1().Secrets(ns).Get(context.Background(), SecretName(pod), metav1.GetOptions{})
	return apierrors.IsNotFound(perr) && apierrors.IsNotFound(serr)
}

func clusterRequest(r *recorder, id string) *scaler.SpawnRequest {
	req := r.request(id)
	req.LabelSet.Image = clusterImage()
	req.LabelSet.ImagePullPolicy = "Never"
	req.LabelSet.RuntimeClassName = ""
	req.LabelSet.Tolerations = nil
	req.LabelSet.NodeSelector = nil
	req.Limits = scaler.Limits{NanoCPUs: 100_000_000, MemoryBytes: 64 << 20}
	return req
}

// An unschedulable pod (a nodeSelector no node matches) waits with the
// scheduler's reason as the job's pending reason; at the spawn deadline
// the pod and its Secret are deleted. The spec the API server stored keeps
// the token out of the environment.
func TestClusterUnschedulableShowsReasonAndSpecHoldsNoToken(t *testing.T) {
	cs, ns := clusterClient(t)
	r := newRecorder()
	b := clusterBackend(t, cs, ns, r)
	id := "scaler-kubernetes-c0000001"
	req := clusterRequest(r, id)
	req.LabelSet.NodeSelector = map[string]string{"kici.dev/no-such-pool": "nowhere"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spawned := make(chan error, 1)
	go func() { spawned <- b.Spawn(ctx, req) }()
	wait.For(t, 60*time.Second, "the unschedulable pending reason", func() bool { return r.sawPending("pod unschedulable: ") })
	if !r.sawPending("node(s) didn't match") {
		t.Errorf("pending reasons %v lack the scheduler's message", r.pending)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(context.Background(), PodName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, e := range c.Env {
			if strings.Contains(e.Value, testToken) || e.Name == "KICI_AGENT_TOKEN" {
				t.Errorf("container %s env %s carries the token", c.Name, e.Name)
			}
		}
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the service account token is mounted")
	}
	wait.For(t, 10*time.Second, "the token Secret owned by the pod", func() bool {
		sec, err := cs.CoreV1().Secrets(ns).Get(context.Background(), SecretName(pod.Name), metav1.GetOptions{})
		return err == nil && len(sec.OwnerReferences) == 1 && sec.OwnerReferences[0].UID == pod.UID
	})
	cancel() // the spawn deadline
	if err := <-spawned; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "unschedulable") {
		t.Errorf("Spawn = %v, want cancelled with the reason", err)
	}
	wait.For(t, 30*time.Second, "the pod and Secret deleted", func() bool { return gone(cs, ns, pod.Name) })
}

// Pods and Secrets of this scaler that no process tracks are deleted at
// construction and their agents reported lost; another scaler's are kept.
func TestClusterOrphansDeletedAtStart(t *testing.T) {
	cs, ns := clusterClient(t)
	ctx := context.Background()
	mk := func(scalerName, id string) {
		meta := managed(id, scalerName, id)
		meta.Namespace = ns
		pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector: map[string]string{"kici.dev/no-such-pool": "nowhere"},
			Containers:   []corev1.Container{{Name: "agent", Image: clusterImage()}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		smeta := managed(SecretName(id), scalerName, id)
		smeta.Namespace = ns
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: smeta}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("pods", "scaler-kubernetes-0dead001")
	mk("other", "scaler-kubernetes-0ther001")
	r := newRecorder()
	b := clusterBackend(t, cs, ns, r)
	if lost := b.LostAtStart(); !slices.Equal(lost, []string{"scaler-kubernetes-0dead001"}) {
		t.Errorf("LostAtStart = %v", lost)
	}
	wait.For(t, 30*time.Second, "the orphan deleted", func() bool { return gone(cs, ns, "scaler-kubernetes-0dead001") })
	if gone(cs, ns, "scaler-kubernetes-0ther001") {
		t.Error("another scaler's pod was deleted")
	}
}

// A pod that a kubelet runs: Spawn returns once the agent container runs;
// Destroy deletes the pod within the stop grace and its Secret, and the
// end is reported with the reason. Needs a Ready node holding the image.
func TestClusterRunningPodDestroyed(t *testing.T) {
	cs, ns := clusterClient(t)
	r := newRecorder()
	b := clusterBackend(t, cs, ns, r)
	id := "scaler-kubernetes-c0000002"
	req := clusterRequest(r, id)
	// Nothing listens there: the agent keeps retrying, so the pod runs.
	req.OrchestratorURL = "ws://192.0.2.1:4000/ws"
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	started := time.Now()
	if err := b.Spawn(ctx, req); err != nil {
		t.Fatalf("Spawn: %v (events %v)", err, r.events)
	}
	t.Logf("pod created → agent container running in %s", time.Since(started).Round(time.Millisecond))
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	t0 := time.Now()
	if err := b.DestroyFor(dctx, id, "cancelled"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "the pod and Secret gone", func() bool { return gone(cs, ns, PodName(id)) })
	if took := time.Since(t0); took > 2*time.Second+10*time.Second {
		t.Errorf("pod gone after %s, beyond the 2 s grace (+10 s slack)", took)
	}
	if err, ok := r.exit(id); !ok || err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("exit = %v (reported %v)", err, ok)
	}
}

// An image the node does not have under imagePullPolicy Never cannot
// start: the spawn fails at once with the kubelet's reason, and the pod
// and its Secret are deleted. Needs a Ready node.
func TestClusterMissingImageFailsSpawnWithReason(t *testing.T) {
	cs, ns := clusterClient(t)
	r := newRecorder()
	b := clusterBackend(t, cs, ns, r)
	id := "scaler-kubernetes-c0000003"
	req := clusterRequest(r, id)
	req.LabelSet.Image = "kici.local/no-such-image:0"
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	err := b.Spawn(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("Spawn = %v, want ErrImageNeverPull (events %v)", err, r.events)
	}
	wait.For(t, 30*time.Second, "the pod and Secret deleted", func() bool { return gone(cs, ns, PodName(id)) })
}

// A job with `container:` and a service runs as one pod on a real node:
// the agent binary copied into the job's image by the init container, the
// service a sidecar, the service's name resolving to 127.0.0.1. Needs a
// Ready node holding the agent image and KICI_TEST_K8S_SERVICE_IMAGE
// (default kici.local/busybox:1, a busybox image).
func TestClusterJobContainerWithServiceRuns(t *testing.T) {
	cs, ns := clusterClient(t)
	r := newRecorder()
	b := clusterBackend(t, cs, ns, r)
	svcImage := os.Getenv("KICI_TEST_K8S_SERVICE_IMAGE")
	if svcImage == "" {
		svcImage = "kici.local/busybox:1"
	}
	id := "scaler-kubernetes-c0000004"
	req := clusterRequest(r, id)
	req.OrchestratorURL = "ws://192.0.2.1:4000/ws"
	req.Job = &scaler.JobContainers{
		Container: &lockfile.Container{Image: clusterImage()},
		Services:  []lockfile.Service{{Name: "db", Image: svcImage, Command: []string{"sh", "-c", "sleep 3600"}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := b.Spawn(ctx, req); err != nil {
		t.Fatalf("Spawn: %v (events %v)", err, r.events)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(context.Background(), PodName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, c := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		switch {
		case c.State.Running != nil:
			states[c.Name] = "running"
		case c.State.Terminated != nil:
			states[c.Name] = "exited " + strconv.Itoa(int(c.State.Terminated.ExitCode))
		default:
			states[c.Name] = "waiting"
		}
	}
	if states[CopyContainer] != "exited 0" || states["svc-db"] != "running" || states[JobContainer] != "running" {
		t.Errorf("container states %v: want the copy done, the service and the job running", states)
	}
	if err := b.DestroyFor(context.Background(), id, "job finished"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "the pod and Secret gone", func() bool { return gone(cs, ns, PodName(id)) })
}

// How many agent pods one backend starts at once here: N pods
// (KICI_TEST_K8S_PODS, default 10) spawned together, each until its agent
// container runs, then all destroyed. Logs pod create → running per pod
// and the total; fails only if a pod does not start or is left behind.
func TestClusterConcurrentPods(t *testing.T) {
	cs, ns := clusterClient(t)
	r := newRecorder()
	b := clusterBackend(t, cs, ns, r)
	n := 10
	if v, err := strconv.Atoi(os.Getenv("KICI_TEST_K8S_PODS")); err == nil && v > 0 {
		n = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type result struct {
		took time.Duration
		err  error
	}
	results := make(chan result, n)
	start := time.Now()
	for i := range n {
		go func() {
			req := clusterRequest(r, fmt.Sprintf("scaler-kubernetes-p%07d", i))
			req.OrchestratorURL = "ws://192.0.2.1:4000/ws"
			t0 := time.Now()
			err := b.Spawn(ctx, req)
			results <- result{time.Since(t0), err}
		}()
	}
	var worst time.Duration
	for range n {
		res := <-results
		if res.err != nil {
			t.Errorf("spawn: %v", res.err)
		}
		worst = max(worst, res.took)
	}
	t.Logf("%d pods running %s after the first create (slowest spawn %s)", n, time.Since(start).Round(time.Millisecond), worst.Round(time.Millisecond))
	t0 := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer scancel()
	b.Shutdown(sctx)
	wait.For(t, 2*time.Minute, "every pod gone", func() bool {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0
	})
	t.Logf("%d pods deleted in %s", n, time.Since(t0).Round(time.Millisecond))
}
