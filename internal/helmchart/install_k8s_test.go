//go:build k8s

package helmchart

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// kube runs kubectl against the test cluster and returns its output.
type kube struct {
	t          *testing.T
	kubeconfig string
}

func (k kube) run(args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (k kube) must(args ...string) string {
	k.t.Helper()
	out, err := k.run(args...)
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

// forward accepts on l and copies each connection to target: the
// throwaway PostgreSQL listens on loopback only, the pods reach the host
// at the node's address.
func forward(t *testing.T, l net.Listener, target string) {
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				d, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer d.Close()
				go func() { _, _ = io.Copy(d, c); _ = d.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, d)
			}()
		}
	}()
}

// TestChartInstallsReadyAndDrainsOnPodDelete installs the chart into a
// namespace of a real cluster (KICI_TEST_KUBECONFIG, brought up by make
// test-k8s) on a throwaway PostgreSQL and an S3 server that this test
// serves on the node's address, waits until every replica passes its
// probes, reads /health through the Service and the cluster's nodes
// through the admin API with the chart's generated token, then deletes
// one pod: it must log its drain and be gone within its termination grace,
// and the Deployment must be whole and ready again.
func TestChartInstallsReadyAndDrainsOnPodDelete(t *testing.T) {
	kubeconfig, image := os.Getenv("KICI_TEST_KUBECONFIG"), os.Getenv("KICI_TEST_K8S_IMAGE")
	if kubeconfig == "" || image == "" {
		t.Fatal("KICI_TEST_KUBECONFIG and KICI_TEST_K8S_IMAGE are not set: run make test-k8s")
	}
	const replicas, graceMs, preStop = 2, 20000, 2
	helm := helmOrFail(t)
	k := kube{t, kubeconfig}
	nodeIP := strings.TrimSpace(k.must("get", "nodes", "-o", `jsonpath={.items[0].status.addresses[?(@.type=="InternalIP")].address}`))
	if net.ParseIP(nodeIP) == nil {
		t.Fatalf("node address %q", nodeIP)
	}

	// PostgreSQL, reached by the pods through a forwarder on the node address.
	db, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	forward(t, pl, db.Host)
	db.Host = pl.Addr().String()

	// S3 (gofakes3), served on the node address.
	const bucket = "kici-chart"
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s3 := &http.Server{Handler: gofakes3.New(backend).Server(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s3.Serve(sl) }()
	t.Cleanup(func() { s3.Close() })

	ns := "kici-chart-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	k.must("create", "namespace", ns)
	t.Cleanup(func() { _, _ = k.run("delete", "namespace", ns, "--wait=false") })

	repo, tag, _ := strings.Cut(image, ":")
	set := []string{
		"replicaCount=" + strconv.Itoa(replicas), "image.repository=" + repo, "image.tag=" + tag, "image.pullPolicy=Never",
		"database.url=" + db.String(), "storage.bucket=" + bucket, "storage.endpoint=http://" + sl.Addr().String(),
		"storage.forcePathStyle=true", "storage.accessKeyId=test", "storage.secretAccessKey=test",
		"shutdownGraceMs=" + strconv.Itoa(graceMs), "preStopSleepSeconds=" + strconv.Itoa(preStop),
		"resources.requests.cpu=50m", "resources.requests.memory=64Mi",
		"env.KICI_LOG_FORMAT=text",
	}
	args := []string{"install", "kici", ChartDir(), "--kubeconfig", kubeconfig, "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	start := time.Now()
	if out, err := Run(helm, args...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := k.run("-n", ns, "get", "pods,events", "-o", "wide")
			logs, _ := k.run("-n", ns, "logs", "-l", "app.kubernetes.io/component=orchestrator", "--tail", "40", "--prefix")
			t.Logf("namespace %s:\n%s\n%s", ns, out, logs)
		}
	})
	// What the API server holds: every object of the chart, and RBAC that
	// lets the orchestrators' service account manage job pods and their
	// token Secrets in this namespace and nothing else.
	for _, obj := range []string{"deployment/kici", "service/kici", "secret/kici", "serviceaccount/kici", "poddisruptionbudget/kici"} {
		k.must("-n", ns, "get", obj, "-o", "name")
	}
	sa := "system:serviceaccount:" + ns + ":kici"
	canI := func(verb, resource, namespace string) bool {
		args := []string{"auth", "can-i", verb, resource, "--as", sa, "-n", namespace}
		if r, sub, ok := strings.Cut(resource, "/"); ok { // "pods/exec" alone would be the pod named exec
			args[3] = r
			args = append(args, "--subresource", sub)
		}
		out, _ := k.run(args...)
		return strings.TrimSpace(out) == "yes"
	}
	scaler := !slices.Contains(set, "kubernetesScaler.enabled=false")
	for _, c := range []struct {
		verb, resource, namespace string
		want                      bool
	}{
		{"create", "pods", ns, scaler}, {"watch", "pods", ns, scaler}, {"delete", "pods", ns, scaler},
		{"create", "secrets", ns, scaler}, {"patch", "secrets", ns, scaler}, {"delete", "secrets", ns, scaler},
		{"get", "secrets", ns, false}, {"update", "pods", ns, false}, {"create", "pods/exec", ns, false},
		{"create", "pods", "default", false}, {"list", "nodes", "", false}, {"create", "deployments", ns, false},
	} {
		if got := canI(c.verb, c.resource, c.namespace); got != c.want {
			t.Errorf("service account %s can %s %s in %q: %v, want %v", sa, c.verb, c.resource, c.namespace, got, c.want)
		}
	}
	dep := "deployment/kici"
	k.must("-n", ns, "rollout", "status", dep, "--timeout", "8m")
	t.Logf("%d replicas ready %.1fs after helm install", replicas, time.Since(start).Seconds())

	// Every replica is a ready endpoint of the Service, and it answers.
	svcIP := strings.TrimSpace(k.must("-n", ns, "get", "service", "kici", "-o", "jsonpath={.spec.clusterIP}"))
	wait.For(t, 60*time.Second, "the Service to list every replica as a ready endpoint", func() bool {
		out, _ := k.run("-n", ns, "get", "endpointslices", "-l", "kubernetes.io/service-name=kici",
			"-o", `jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]} {end}`)
		return len(strings.Fields(out)) == replicas
	})
	base := "http://" + net.JoinHostPort(svcIP, "4000")
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatalf("GET /health through the Service: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("GET /health through the Service = %d %s", resp.StatusCode, body)
	}

	// The generated admin token works, and the replicas formed one cluster.
	tok := strings.TrimSpace(k.must("-n", ns, "get", "secret", "kici", "-o", "jsonpath={.data.adminToken}"))
	raw, err := base64.StdEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	token := string(raw)
	wait.For(t, 60*time.Second, "the admin API to list every replica as an alive node", func() bool {
		return len(aliveNodes(t, base, token)) == replicas && everyPodAlive(t, k, ns, base, token)
	})

	// The scaler started with the Role it was given: no request of the
	// replicas was refused by RBAC (orphan sweep, informer).
	if out := k.must("-n", ns, "logs", "-l", "app.kubernetes.io/component=orchestrator", "--tail=-1", "--prefix"); strings.Contains(out, "forbidden") {
		t.Errorf("a replica was refused by the API server:\n%s", tail(out, 20))
	}

	// Delete one pod: it drains (its log says so) and is gone within its grace.
	pod := strings.TrimSpace(k.must("-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=orchestrator", "-o", "jsonpath={.items[0].metadata.name}"))
	var logs syncBuffer
	follow := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", ns, "logs", "-f", pod)
	follow.Stdout = &logs
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follow.Process.Kill(); _ = follow.Wait() })
	wait.For(t, 30*time.Second, "the pod's log to stream", func() bool { return logs.Len() > 0 })
	grace := time.Duration((graceMs+999)/1000+30+preStop) * time.Second
	deleted := time.Now()
	k.must("-n", ns, "delete", "pod", pod, "--wait=false")
	k.must("-n", ns, "wait", "--for=delete", "pod/"+pod, "--timeout", grace.String())
	gone := time.Since(deleted)
	_ = follow.Wait()
	if !strings.Contains(logs.String(), "stopping: drained, no job running") {
		t.Fatalf("the deleted pod did not log its drain:\n%s", tail(logs.String(), 20))
	}
	t.Logf("pod %s deleted: drained and gone in %.1fs (grace %s, preStop %ds)", pod, gone.Seconds(), grace, preStop)
	k.must("-n", ns, "rollout", "status", dep, "--timeout", "5m")
	wait.For(t, 90*time.Second, "the replacement replica to join the cluster", func() bool {
		return everyPodAlive(t, k, ns, base, token)
	})
}

// aliveNodes returns the addresses of the nodes GET
// /api/v1/admin/cluster/nodes reports alive (http://<pod IP>:4000 here,
// KICI_CLUSTER_ADDRESS).
func aliveNodes(t *testing.T, base, token string) map[string]bool {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/api/v1/admin/cluster/nodes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		t.Fatalf("the chart's admin token was refused: %d", resp.StatusCode)
	}
	var list apitypes.ClusterNodeList
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, node := range list.Nodes {
		if node.Alive {
			out[node.Address] = true
		}
	}
	return out
}

// everyPodAlive reports whether each orchestrator pod's address is an
// alive node of the cluster.
func everyPodAlive(t *testing.T, k kube, ns, base, token string) bool {
	ips := strings.Fields(k.must("-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=orchestrator",
		"--field-selector", "status.phase=Running", "-o", "jsonpath={.items[*].status.podIP}"))
	alive := aliveNodes(t, base, token)
	for _, ip := range ips {
		if !alive["http://"+net.JoinHostPort(ip, "4000")] {
			return false
		}
	}
	return len(ips) > 0
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
func (s *syncBuffer) Len() int       { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Len() }

func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
