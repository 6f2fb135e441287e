//go:build k8s

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"kici.dev/kici/internal/testutil/wait"
)

// The tests of this file run kici's jobs in pods of the real one-node
// cluster of scripts/k8s/cluster.sh: an orchestrator on this machine with a
// `kubernetes` scaler, its agents in pods of a namespace of the test's own,
// dialling back to the orchestrator at the node's address.

// k8sAgentImage is the image of the agent pods: make test-k8s imports the
// orchestrator image (it holds /usr/local/bin/kici-agent and busybox) and
// names it in KICI_TEST_K8S_IMAGE.
func k8sAgentImage(t *testing.T) string {
	t.Helper()
	img := os.Getenv("KICI_TEST_K8S_IMAGE")
	if img == "" {
		t.Fatal("KICI_TEST_K8S_IMAGE is not set: run make test-k8s (it imports the kici image into the node)")
	}
	return img
}

// k8sOrchestrator starts an orchestrator listening on the node's address
// (where pods reach this machine) with a kubernetes scaler named name in
// namespace ns: label `pod` schedules anywhere; label `nowhere` asks for a
// node label no node has.
func k8sOrchestrator(t *testing.T, cs *kubernetes.Clientset, ns, name string, maxAgents int, extra ...string) *orchestrator {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "scalers.yaml")
	write(t, cfg, fmt.Sprintf(`version: 1
scalers:
  - name: %s
    type: kubernetes
    maxAgents: %d
    maxConcurrentSpawns: %d
    namespace: %s
    kubeconfig: %s
%s    labelSets:
      - labels: [pod]
        image: %s
        imagePullPolicy: Never
      - labels: [nowhere]
        image: %[7]s
        imagePullPolicy: Never
        nodeSelector: { kici.dev/pool: none }
`, name, maxAgents, min(maxAgents, 8), ns, os.Getenv("KICI_TEST_KUBECONFIG"), strings.Join(extra, ""), k8sAgentImage(t)))
	return startOrchestrator(t, "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_HOST="+nodeAddress(t, cs),
		"KICI_SHUTDOWN_GRACE_MS=0")
}

// scalerPods lists the pods the scaler made in ns.
func scalerPods(t *testing.T, cs *kubernetes.Clientset, ns, name string) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kici-scaler-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// podWatch records, for every pod of the scaler, when this test first saw
// it (its creation, to within the watch's delay) and the largest number of
// its pods that ran at once.
type podWatch struct {
	mu         sync.Mutex
	firstSeen  map[string]time.Time // by job id (annotation kici.dev/job-id)
	running    map[string]bool      // pod name → phase Running now
	maxRunning int
}

func watchPods(t *testing.T, cs *kubernetes.Clientset, ns, name string) *podWatch {
	t.Helper()
	ctx := t.Context()
	pw := &podWatch{firstSeen: map[string]time.Time{}, running: map[string]bool{}}
	go func() {
		// A watch may end, or open with an error event (the API server on
		// this etcd answers "too large resource version" now and then):
		// open it again until the test ends.
		for ctx.Err() == nil {
			w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "kici-scaler-name=" + name})
			if err != nil {
				wait.Elapse(ctx, 100*time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					break
				}
				pw.record(ev.Type, pod)
			}
			w.Stop()
		}
	}()
	return pw
}

// record notes one event of pod.
func (pw *podWatch) record(typ watch.EventType, pod *corev1.Pod) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if job := pod.Annotations["kici.dev/job-id"]; job != "" {
		if _, seen := pw.firstSeen[job]; !seen {
			pw.firstSeen[job] = time.Now()
		}
	}
	pw.running[pod.Name] = typ != watch.Deleted && pod.Status.Phase == corev1.PodRunning
	n := 0
	for _, r := range pw.running {
		if r {
			n++
		}
	}
	pw.maxRunning = max(pw.maxRunning, n)
}

// k8sJob is a job row with its start time.
type k8sJob struct {
	JobID         string     `json:"jobId"`
	JobName       string     `json:"jobName"`
	Status        string     `json:"status"`
	ErrorMessage  string     `json:"errorMessage"`
	RoutingReason string     `json:"routingReason"`
	StartedAt     *time.Time `json:"startedAt"`
}

func (o *orchestrator) k8sJobs(t *testing.T, runID string) []k8sJob {
	t.Helper()
	var resp struct {
		Jobs []k8sJob `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+runID+"/jobs", &resp)
	return resp.Jobs
}

const k8sWorkflow = `name: pods
on:
  push:
    branches: [main]
jobs:
  plain:
    runsOn: pod
    checkout: false
    steps:
      - shell: sh
        run: echo "plain job on $(hostname) as uid $(id -u)"
  boxed:
    runsOn: pod
    checkout: false
    container:
      image: kici.local/busybox:1
      env: {GREETING: hello-from-the-job-image}
    services:
      web:
        image: kici.local/busybox:1
        command: [/bin/busybox, httpd, -f, -p, "8080", -h, /bin]
        ports: [8080]
    steps:
      - shell: sh
        run: |
          echo "$GREETING"
          wget -q -O /dev/null http://web:8080/busybox && echo "service web answered"
`

// TestKubernetesJobsRunInPods: a workflow's jobs run in pods, one per job,
// a container job in its own image with its service as a sidecar reached by
// name; the pods hold no token in their spec and are gone after the run.
func TestKubernetesJobsRunInPods(t *testing.T) {
	cs, ns := k8sClient(t)
	name := "k8s-jobs"
	o := k8sOrchestrator(t, cs, ns, name, 4)
	pw := watchPods(t, cs, ns, name)
	repo := makeWorkflowRepo(t, k8sWorkflow)
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "pods", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	r := o.waitRun(t, delivery, 4*time.Minute)
	jobs := o.k8sJobs(t, r.RunID)
	if r.Status != "success" || len(jobs) != 2 {
		for _, j := range jobs {
			t.Logf("job %s: %s %s", j.JobName, j.Status, j.ErrorMessage)
		}
		t.Fatalf("run %s with %d jobs, want success with 2", r.Status, len(jobs))
	}
	for _, j := range jobs {
		log := o.logText(t, r.RunID, j.JobID, 0)
		switch j.JobName {
		case "plain":
			if !strings.Contains(log, "plain job on scaler-kubernetes-") || !strings.Contains(log, "as uid ") {
				t.Errorf("plain job's log does not show it ran in its pod:\n%s", log)
			}
		case "boxed":
			if !strings.Contains(log, "hello-from-the-job-image") || !strings.Contains(log, "service web answered") {
				t.Errorf("container job's log lacks the image's env or the service:\n%s", log)
			}
		}
	}
	pw.mu.Lock()
	seen := len(pw.firstSeen)
	var latencies []time.Duration
	for _, j := range jobs {
		if at, ok := pw.firstSeen[j.JobID]; ok && j.StartedAt != nil {
			latencies = append(latencies, j.StartedAt.Sub(at))
		}
	}
	pw.mu.Unlock()
	if seen != 2 {
		t.Errorf("saw pods for %d jobs, want one pod per job (2)", seen)
	}
	t.Logf("pod created → job started: %v", latencies)
	if !wait.Until(60*time.Second, func() bool { return len(scalerPods(t, cs, ns, name)) == 0 }) {
		t.Errorf("pods left after the run: %d", len(scalerPods(t, cs, ns, name)))
	}
	secrets, err := cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kici-managed=true"})
	if err == nil && !wait.Until(60*time.Second, func() bool {
		secrets, err = cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kici-managed=true"})
		return err == nil && len(secrets.Items) == 0
	}) {
		t.Errorf("token secrets left after the run: %d", len(secrets.Items))
	}
}

// longWorkflow is one job whose step sleeps far longer than the test.
const longWorkflow = `name: long
on:
  push:
    branches: [main]
jobs:
  long:
    runsOn: %s
    checkout: false
    steps:
      - shell: sh
        run: |
          echo "step started"
          sleep 600
`

// startLong triggers longWorkflow on label and returns the run id and the
// pod of its job once the step runs.
func startLong(t *testing.T, o *orchestrator, cs *kubernetes.Clientset, ns, name string) (string, string, k8sJob) {
	t.Helper()
	repo := makeWorkflowRepo(t, fmt.Sprintf(longWorkflow, "pod"))
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	var job k8sJob
	if !wait.Until(3*time.Minute, func() bool {
		jobs := o.k8sJobs(t, runID)
		if len(jobs) != 1 || jobs[0].Status != "running" {
			return false
		}
		job = jobs[0]
		return strings.Contains(o.logText(t, runID, job.JobID, 0), "step started")
	}) {
		t.Fatalf("the long step never started (job %+v)", job)
	}
	pods := scalerPods(t, cs, ns, name)
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("want the one running pod of the job, have %d", len(pods))
	}
	return runID, pods[0].Name, job
}

// TestKubernetesCancelDeletesThePod: a run cancelled mid-step ends
// cancelled and its pod is gone within the stop grace.
func TestKubernetesCancelDeletesThePod(t *testing.T) {
	cs, ns := k8sClient(t)
	name := "k8s-cancel"
	o := k8sOrchestrator(t, cs, ns, name, 2)
	runID, pod, _ := startLong(t, o, cs, ns, name)
	start := time.Now()
	o.admin(t, "runs", "cancel", runID)
	o.waitRunStatus(t, runID, time.Minute, "cancelled")
	if !wait.Until(60*time.Second, func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		return err != nil
	}) {
		t.Fatalf("pod %s still exists %v after the cancel", pod, time.Since(start))
	}
	took := time.Since(start)
	t.Logf("cancel → pod gone: %v", took.Round(time.Millisecond))
	// The stop grace (10 s) plus the kubelet's own teardown.
	if took > 40*time.Second {
		t.Errorf("pod gone after %v, want within the grace", took)
	}
}

// TestKubernetesAgentPodKilled: the agent killed in its pod (SIGKILL, as
// the OOM killer or a crash does) under a running job fails the job with
// the agent's loss as reason, and the pod is deleted. A pod deleted
// through the API instead gets SIGTERM first: its agent says it is shutting
// down and the job ends cancelled, as for any agent told to stop.
func TestKubernetesAgentPodKilled(t *testing.T) {
	cs, ns := k8sClient(t)
	name := "k8s-kill"
	o := k8sOrchestrator(t, cs, ns, name, 2)
	runID, podName, job := startLong(t, o, cs, ns, name)
	pod, err := cs.CoreV1().Pods(ns).Get(context.Background(), podName, metav1.GetOptions{})
	if err != nil || len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s: %v", podName, err)
	}
	ctrID := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	sock := filepath.Join(filepath.Dir(os.Getenv("KICI_TEST_KUBECONFIG")), "containerd", "containerd.sock")
	if out, err := exec.Command("ctr", "-a", sock, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", ctrID).CombinedOutput(); err != nil {
		t.Fatalf("killing the agent's container %s: %v\n%s", ctrID, err, out)
	}
	r := o.waitRunStatus(t, runID, 2*time.Minute, "failed", "cancelled")
	var got k8sJob
	for _, j := range o.k8sJobs(t, runID) {
		if j.JobID == job.JobID {
			got = j
		}
	}
	t.Logf("run %s; job %s: %q", r.Status, got.Status, got.ErrorMessage)
	if r.Status != "failed" || got.Status != "failed" {
		t.Errorf("run %s, job %s; want both failed", r.Status, got.Status)
	}
	if !strings.Contains(strings.ToLower(got.ErrorMessage), "agent") {
		t.Errorf("job error %q does not name the agent's loss", got.ErrorMessage)
	}
	if !wait.Until(60*time.Second, func() bool { return len(scalerPods(t, cs, ns, name)) == 0 }) {
		t.Errorf("pods left: %d", len(scalerPods(t, cs, ns, name)))
	}

	runID, podName, job = startLong(t, o, cs, ns, name)
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), podName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r = o.waitRunStatus(t, runID, 2*time.Minute, "failed", "cancelled")
	for _, j := range o.k8sJobs(t, runID) {
		if j.JobID == job.JobID {
			got = j
		}
	}
	t.Logf("pod deleted: run %s; job %s: %q", r.Status, got.Status, got.ErrorMessage)
	if got.Status != "cancelled" || !strings.Contains(got.ErrorMessage, "shutting down") {
		t.Errorf("job of a deleted pod: %s %q, want cancelled: agent shutting down", got.Status, got.ErrorMessage)
	}
	if !wait.Until(60*time.Second, func() bool { return len(scalerPods(t, cs, ns, name)) == 0 }) {
		t.Errorf("pods left: %d", len(scalerPods(t, cs, ns, name)))
	}
}

// TestKubernetesUnschedulableShowsPendingReason: a job whose pod no node
// can take waits with the scheduler's reason as its pending reason.
func TestKubernetesUnschedulableShowsPendingReason(t *testing.T) {
	cs, ns := k8sClient(t)
	name := "k8s-nowhere"
	o := k8sOrchestrator(t, cs, ns, name, 2)
	repo := makeWorkflowRepo(t, fmt.Sprintf(longWorkflow, "nowhere"))
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	var reason string
	if !wait.Until(2*time.Minute, func() bool {
		jobs := o.k8sJobs(t, runID)
		if len(jobs) == 1 {
			reason = jobs[0].RoutingReason
		}
		return strings.Contains(strings.ToLower(reason), "unschedulable")
	}) {
		t.Fatalf("pending reason %q, want the pod's unschedulable reason", reason)
	}
	t.Logf("pending reason: %s", reason)
	if !strings.Contains(reason, "node") {
		t.Errorf("pending reason %q does not carry the scheduler's message", reason)
	}
	o.admin(t, "runs", "cancel", runID)
	o.waitRunStatus(t, runID, time.Minute, "cancelled")
	if !wait.Until(60*time.Second, func() bool { return len(scalerPods(t, cs, ns, name)) == 0 }) {
		t.Errorf("the unschedulable pod outlived the cancelled run")
	}
}

// TestKubernetesConcurrentJobPods measures how many job pods one
// orchestrator runs at once on this machine and the pod → job start
// latency under that load: 16 jobs, maxAgents 16.
func TestKubernetesConcurrentJobPods(t *testing.T) {
	cs, ns := k8sClient(t)
	name := "k8s-many"
	const n = 16
	o := k8sOrchestrator(t, cs, ns, name, n)
	pw := watchPods(t, cs, ns, name)
	repo := makeWorkflowRepo(t, strings.Replace(manyJobsWorkflow(n, "    runsOn: pod\n    checkout: false\n"), "sleep 0.3", "sleep 5", 1))
	_, delivery := o.push(t, repo, "")
	start := time.Now()
	r := o.waitRun(t, delivery, 10*time.Minute)
	took := time.Since(start)
	jobs := o.k8sJobs(t, r.RunID)
	if r.Status != "success" || len(jobs) != n {
		t.Fatalf("run %s with %d jobs, want success with %d", r.Status, len(jobs), n)
	}
	pw.mu.Lock()
	var lat []time.Duration
	for _, j := range jobs {
		if at, ok := pw.firstSeen[j.JobID]; ok && j.StartedAt != nil {
			lat = append(lat, j.StartedAt.Sub(at))
		}
	}
	maxRunning := pw.maxRunning
	pw.mu.Unlock()
	slices.Sort(lat)
	if len(lat) != n {
		t.Fatalf("matched %d of %d jobs to their pods", len(lat), n)
	}
	t.Logf("%d jobs of 5 s in pods: run took %v; at most %d pods running at once; pod created → job started p50 %v, max %v",
		n, took.Round(time.Millisecond), maxRunning, lat[n/2].Round(time.Millisecond), lat[n-1].Round(time.Millisecond))
	if maxRunning < 2 {
		t.Errorf("at most %d pods ran at once: the jobs did not run side by side", maxRunning)
	}
}

// TestKubernetesWarmPoolTakesPlainJobsOnly: a warm pod waits before any
// job; a plain job starts on it, while a container job, whose pod must be
// made of its image and services, gets a pod of its own.
func TestKubernetesWarmPoolTakesPlainJobsOnly(t *testing.T) {
	cs, ns := k8sClient(t)
	name := "k8s-warm"
	o := k8sOrchestrator(t, cs, ns, name, 4, "    warmPool: { enabled: true, size: 1 }\n")
	var warm string
	if !wait.Until(2*time.Minute, func() bool {
		for _, p := range scalerPods(t, cs, ns, name) {
			if p.Labels["kici-bound-job-id"] == "" && p.Status.Phase == corev1.PodRunning {
				warm = p.Name
			}
		}
		return warm != "" && strings.Contains(readFile(t, o.logPath), `msg="agent registered" component=dispatch agent=`+warm)
	}) {
		t.Fatal("no warm pod ran and registered")
	}
	repo := makeWorkflowRepo(t, k8sWorkflow)
	_, delivery := o.push(t, repo, "")
	r := o.waitRun(t, delivery, 4*time.Minute)
	jobs := o.k8sJobs(t, r.RunID)
	if r.Status != "success" || len(jobs) != 2 {
		t.Fatalf("run %s with %d jobs", r.Status, len(jobs))
	}
	for _, j := range jobs {
		log := o.logText(t, r.RunID, j.JobID, 0)
		switch j.JobName {
		case "plain":
			if !strings.Contains(log, "plain job on "+warm) {
				t.Errorf("the plain job did not run on the warm pod %s:\n%s", warm, log)
			}
		case "boxed":
			if !strings.Contains(log, "service web answered") {
				t.Errorf("the container job did not run in a pod of its own with its service:\n%s", log)
			}
		}
	}
}
