package kubernetes

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/scaler/scalerconfig"
)

const testToken = "kat_0123456789abcdef0123456789abcdef"

func spawnRequest() *scaler.SpawnRequest {
	cpus, mem := 1.5, "512m"
	return &scaler.SpawnRequest{
		AgentID: "scaler-kubernetes-0a1b2c3d", JobID: "job:with/odd chars", RunID: "run-1",
		Entry: &scaler.Entry{Name: "pods", Type: scaler.TypeKubernetes},
		LabelSet: &scaler.LabelSet{Labels: []string{"linux", "pod"}, Image: "kici:dev", ImagePullPolicy: "Never",
			Resources: &scalerconfig.Resources{CPUs: &cpus, Memory: &mem}, Env: map[string]string{"FOO": "bar"},
			KubernetesLabelSet: scalerconfig.KubernetesLabelSet{NodeSelector: map[string]string{"pool": "ci"},
				Tolerations:      []scaler.Toleration{{Key: "dedicated", Operator: "Equal", Value: "ci", Effect: "NoSchedule"}},
				RuntimeClassName: "gvisor"}},
		OrchestratorURL: "ws://kici.ci.svc:4000/ws", Token: testToken,
		Limits: scaler.Limits{NanoCPUs: 1_500_000_000, MemoryBytes: 512 << 20},
		Emit:   func(scaler.EventType, string) {},
	}
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func TestAgentPodSpec(t *testing.T) {
	pod, secret, err := BuildPod(spawnRequest(), PodParams{Namespace: "ci", ScalerName: "pods", StopGrace: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "scaler-kubernetes-0a1b2c3d" || pod.Namespace != "ci" {
		t.Errorf("pod %s/%s", pod.Namespace, pod.Name)
	}
	wantLabels := map[string]string{"kici-managed": "true", "kici-scaler-name": "pods", "kici-agent-id": "scaler-kubernetes-0a1b2c3d",
		"kici-bound-job-id": "job-with-odd-chars", "kici-run-id": "run-1"}
	for k, v := range wantLabels {
		if pod.Labels[k] != v || secret.Labels[k] != v {
			t.Errorf("label %s: pod %q secret %q, want %q", k, pod.Labels[k], secret.Labels[k], v)
		}
	}
	if pod.Annotations[AnnotationJobID] != "job:with/odd chars" {
		t.Errorf("raw job id annotation = %q", pod.Annotations[AnnotationJobID])
	}
	s := pod.Spec
	if s.RestartPolicy != corev1.RestartPolicyNever || *s.AutomountServiceAccountToken || *s.EnableServiceLinks {
		t.Errorf("restartPolicy %s, automount %v, service links %v", s.RestartPolicy, *s.AutomountServiceAccountToken, *s.EnableServiceLinks)
	}
	if *s.TerminationGracePeriodSeconds != 15 || s.NodeSelector["pool"] != "ci" || *s.RuntimeClassName != "gvisor" ||
		len(s.Tolerations) != 1 || s.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("pod template not applied: %+v", s)
	}
	if len(s.Containers) != 1 || len(s.InitContainers) != 0 {
		t.Fatalf("containers %d, init %d; want the agent alone", len(s.Containers), len(s.InitContainers))
	}
	c := s.Containers[0]
	if c.Name != AgentContainer || c.Image != "kici:dev" || c.ImagePullPolicy != corev1.PullNever || !slices.Equal(c.Command, []string{AgentBinary}) {
		t.Errorf("agent container %s %s %s %v", c.Name, c.Image, c.ImagePullPolicy, c.Command)
	}
	if !*c.SecurityContext.RunAsNonRoot || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Error("the agent container must run as non-root without privilege escalation")
	}
	env := envOf(c)
	for k, v := range map[string]string{"KICI_AGENT_TOKEN_FILE": "/kici/token/token", "KICI_ORCHESTRATOR_URL": "ws://kici.ci.svc:4000/ws",
		"KICI_AGENT_ID": "scaler-kubernetes-0a1b2c3d", "KICI_LABELS": "linux,pod", "FOO": "bar", "KICI_SCALER_MANAGED": "true"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["KICI_AGENT_TOKEN"]; ok {
		t.Error("KICI_AGENT_TOKEN is in the pod's environment")
	}
	if cpu, mem := c.Resources.Limits.Cpu().MilliValue(), c.Resources.Limits.Memory().Value(); cpu != 1500 || mem != 512<<20 {
		t.Errorf("limits cpu %dm memory %d", cpu, mem)
	}
	if c.Resources.Requests.Cpu().MilliValue() != 1500 {
		t.Error("requests must equal limits")
	}
	if string(secret.Data[TokenKey]) != testToken || secret.Name != "scaler-kubernetes-0a1b2c3d-token" {
		t.Errorf("secret %s holds %q", secret.Name, secret.Data[TokenKey])
	}
	var tokenVol *corev1.Volume
	for i := range s.Volumes {
		if s.Volumes[i].Secret != nil {
			tokenVol = &s.Volumes[i]
		}
	}
	if tokenVol == nil || tokenVol.Secret.SecretName != secret.Name || *tokenVol.Secret.DefaultMode != 0o440 {
		t.Fatalf("token volume = %+v", tokenVol)
	}
	for _, m := range c.VolumeMounts {
		if m.Name == tokenVol.Name && (!m.ReadOnly || m.MountPath != TokenDir) {
			t.Errorf("token mount %+v: want read-only at %s", m, TokenDir)
		}
	}
}

func TestJobContainerAndServicesPod(t *testing.T) {
	req := spawnRequest()
	req.Job = &scaler.JobContainers{
		Container: &lockfile.Container{Image: "golang:1.26", Env: map[string]string{"CGO_ENABLED": "0"}},
		Services: []lockfile.Service{{Name: "postgres", Image: "postgres:17", Env: map[string]string{"POSTGRES_PASSWORD": "x"}, Ports: []int{5432}},
			{Name: "redis", Image: "redis:8", Command: []string{"--port", "6380"}}},
	}
	pod, _, err := BuildPod(req, PodParams{Namespace: "ci", ScalerName: "pods", StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	if len(s.Containers) != 1 || s.Containers[0].Name != JobContainer || s.Containers[0].Image != "golang:1.26" {
		t.Fatalf("main container %+v", s.Containers)
	}
	job := s.Containers[0]
	if !slices.Equal(job.Command, []string{"/kici/bin/kici-agent"}) || envOf(job)["KICI_AGENT_JOB_CONTAINER"] != "pod" {
		t.Errorf("job container runs %v with KICI_AGENT_JOB_CONTAINER=%q", job.Command, envOf(job)["KICI_AGENT_JOB_CONTAINER"])
	}
	var names []string
	for _, c := range s.InitContainers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"kici-agent", "svc-postgres", "svc-redis"}) {
		t.Fatalf("init containers %v", names)
	}
	cp := s.InitContainers[0]
	if cp.Image != "kici:dev" || !slices.Equal(cp.Command, []string{"/bin/cp", AgentBinary, "/kici/bin/kici-agent"}) {
		t.Errorf("copy container %s %v", cp.Image, cp.Command)
	}
	for _, svc := range s.InitContainers[1:] {
		if svc.RestartPolicy == nil || *svc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("service %s is not a sidecar: the pod would never complete", svc.Name)
		}
		if len(svc.VolumeMounts) != 0 {
			t.Errorf("service %s mounts %v: services must not see the token", svc.Name, svc.VolumeMounts)
		}
	}
	if envOf(s.InitContainers[1])["POSTGRES_PASSWORD"] != "x" || !slices.Equal(s.InitContainers[2].Args, []string{"--port", "6380"}) {
		t.Error("service env or command lost")
	}
	if ports := s.InitContainers[1].Ports; len(ports) != 1 || ports[0].ContainerPort != 5432 || ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("service ports = %+v, want 5432/TCP from the lock's ports", ports)
	}
	if len(s.HostAliases) != 1 || s.HostAliases[0].IP != "127.0.0.1" || !slices.Equal(s.HostAliases[0].Hostnames, []string{"postgres", "redis"}) {
		t.Errorf("hostAliases = %+v", s.HostAliases)
	}
}

func TestPodSpecRefusals(t *testing.T) {
	req := spawnRequest()
	req.Job = &scaler.JobContainers{Container: &lockfile.Container{Build: &lockfile.ContainerBuild{}}}
	if _, _, err := BuildPod(req, PodParams{}); err == nil || !strings.Contains(err.Error(), "container.build") {
		t.Errorf("container.build: err = %v", err)
	}
	req = spawnRequest()
	req.LabelSet.Env = map[string]string{"LEAK": "x" + testToken}
	if _, _, err := BuildPod(req, PodParams{}); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("token in env: err = %v", err)
	}
	req = spawnRequest()
	req.Job = &scaler.JobContainers{Services: []lockfile.Service{{Name: strings.Repeat("a", 60), Image: "x"}}}
	if _, _, err := BuildPod(req, PodParams{}); err == nil || !strings.Contains(err.Error(), "container name") {
		t.Errorf("long service name: err = %v", err)
	}
}

func TestServiceAccountMountsItsToken(t *testing.T) {
	req := spawnRequest()
	req.LabelSet.ServiceAccountName = "kici-job"
	pod, _, err := BuildPod(req, PodParams{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "kici-job" || !*pod.Spec.AutomountServiceAccountToken {
		t.Errorf("service account %q automount %v", pod.Spec.ServiceAccountName, *pod.Spec.AutomountServiceAccountToken)
	}
}

func TestNamesFollowKubernetesRules(t *testing.T) {
	for in, want := range map[string]string{
		"scaler-kubernetes-0a1b2c3d": "scaler-kubernetes-0a1b2c3d",
		"-job:id/with spaces_":       "job-id-with-spaces",
		strings.Repeat("x", 70):      strings.Repeat("x", 63),
	} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
	if got := PodName("Scaler_Kubernetes.AB"); got != "scaler-kubernetes-ab" {
		t.Errorf("PodName = %q", got)
	}
}

func TestCheckReachRefusesLoopback(t *testing.T) {
	for _, u := range []string{"ws://127.0.0.1:4000/ws", "ws://localhost:4000/ws", "ws://0.0.0.0:4000/ws,ws://other/ws"} {
		if err := checkReach(u); err == nil || !strings.Contains(err.Error(), "orchestratorUrl") {
			t.Errorf("%s: err = %v", u, err)
		}
	}
	if err := checkReach("ws://kici.ci.svc:4000/ws"); err != nil {
		t.Error(err)
	}
}
