//go:build k8s

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kici.dev/kici/internal/testutil/wait"
)

// k8sTestImage is the busybox image scripts/k8s/cluster.sh builds FROM
// scratch and imports into the node (no registry is reachable).
const k8sTestImage = "kici.local/busybox:1"

// k8sClient connects to the cluster of KICI_TEST_KUBECONFIG (make test-k8s
// sets it to the one scripts/k8s/cluster.sh brings up) and makes a
// namespace of the test's own, deleted with its pods when the test ends.
func k8sClient(t *testing.T) (*kubernetes.Clientset, string) {
	t.Helper()
	path := os.Getenv("KICI_TEST_KUBECONFIG")
	if path == "" {
		t.Fatal("KICI_TEST_KUBECONFIG is not set: run make test-k8s (it brings the cluster up with scripts/k8s/cluster.sh)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kici-e2e-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	// Pods need the namespace's default service account, which the
	// controller manager creates shortly after the namespace.
	wait.For(t, 60*time.Second, "the default service account of "+ns.Name, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	return cs, ns.Name
}

// nodeAddress is the InternalIP of the cluster's one Ready node: the address
// this machine's listeners are reached at from the pods.
func nodeAddress(t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
	}
	t.Fatalf("no node with an InternalIP among %d nodes", len(nodes.Items))
	return ""
}

func busyboxPod(name string, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           k8sTestImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/bin/sh", "-c", script},
			}},
		},
	}
}

// TestK8sClusterRunsPods proves the cluster of make test-k8s is real: the
// scheduler places a pod on the node, the kubelet runs its container
// through containerd with a Secret mounted as a volume, the pod reaches a
// listener on this machine over the pod network, the container exits 0,
// the pod ends Succeeded and its output is read back through the API
// server (which fetches it from the kubelet).
func TestK8sClusterRunsPods(t *testing.T) {
	cs, ns := k8sClient(t)
	ctx := context.Background()

	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "pong-from-host")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(nodeAddress(t, cs), fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)))

	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		StringData: map[string]string{"word": "secret-volume-works"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod("smoke", `echo "hello from $(hostname)"; cat /run/smoke/word; echo; wget -q -O - "$1"; echo; test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo "service account token mounted"`)
	pod.Spec.Containers[0].Args = []string{"sh", url}
	pod.Spec.Volumes = []corev1.Volume{{Name: "smoke", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "smoke"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "smoke", MountPath: "/run/smoke", ReadOnly: true}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	wait.For(t, 3*time.Minute, "pod smoke to end", func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	})
	logs, err := cs.CoreV1().Pods(ns).GetLogs("smoke", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the pod's log through the API server: %v", err)
	}
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod smoke ended %s; its log:\n%s", phase, logs)
	}
	for _, want := range []string{"hello from smoke\n", "secret-volume-works\n", "pong-from-host\n", "service account token mounted\n"} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("the pod's log lacks %q; it is:\n%s", want, logs)
		}
	}
}

// TestK8sPodStartLatency measures, one pod at a time, how long a pod takes
// from its creation to its container running (polled through the API
// server every wait.Interval), over ten pods, and logs the median and the
// slowest: the floor under any job's start on the kubernetes scaler here.
func TestK8sPodStartLatency(t *testing.T) {
	cs, ns := k8sClient(t)
	ctx := context.Background()
	const pods = 10
	var took []time.Duration
	for i := range pods {
		name := fmt.Sprintf("latency-%d", i)
		start := time.Now()
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod(name, "exec sleep 3600"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var running time.Time
		var last *corev1.Pod
		if !wait.Until(2*time.Minute, func() bool {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			last = p
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Running != nil {
					running = time.Now()
					return true
				}
			}
			return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		}) || running.IsZero() {
			t.Fatalf("pod %s did not get a running container in 2m; its status: %+v", name, last.Status)
		}
		took = append(took, running.Sub(start))
		// Deleting as we go keeps each measurement to one pod starting.
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(took)
	t.Logf("pod create → container running, %d pods one at a time: p50 %s, max %s (all: %v)",
		pods, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), took)
}
