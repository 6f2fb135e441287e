// Package kubernetes is the kubernetes scaler backend: one pod per agent
// (and so per job) on a Kubernetes cluster, reached through client-go, with
// the agent's one-session token in a Secret mounted read-only into the
// pod, never in its environment (docs/kubernetes.md, "The kubernetes
// scaler"). It lives apart from package scaler so that only the
// orchestrator links client-go.
package kubernetes

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/scaler"
)

// Pod labels (the container backend's label names, scaler.Label*) and
// annotations carrying the raw ids, which label values may not hold
// verbatim (Kubernetes label-value rules).
const (
	AnnotationAgentID = "kici.dev/agent-id"
	AnnotationJobID   = "kici.dev/job-id"
	AnnotationRunID   = "kici.dev/run-id"
)

// Paths and names inside an agent pod (the contract with the agent:
// KICI_AGENT_TOKEN_FILE, KICI_AGENT_JOB_CONTAINER=pod).
const (
	// TokenDir holds the token Secret's single file TokenKey.
	TokenDir = "/kici/token"
	// TokenKey is the Secret's data key and the file name under TokenDir.
	TokenKey = "token"
	// WorkDir is the agent's work directory (an emptyDir).
	WorkDir = "/kici/work"
	// BinDir receives the agent binary copied by the init container when
	// the job runs in its own image.
	BinDir = "/kici/bin"
	// AgentBinary is the agent's path in the label set's image.
	AgentBinary = "/usr/local/bin/kici-agent"
	// AgentContainer runs the agent in the label set's image; JobContainer
	// runs it inside the job's `container:` image; CopyContainer is the
	// init container copying AgentBinary into BinDir; ServicePrefix
	// prefixes each service's container name.
	AgentContainer = "agent"
	JobContainer   = "job"
	CopyContainer  = "kici-agent"
	ServicePrefix  = "svc-"
	// PodGroup is the pod's fsGroup: the token file is readable by this
	// group only (mode 0440), which the agent's processes carry and the
	// steps it starts under another user do not. 10001 is the group of the
	// kici image's user.
	PodGroup = 10001
)

// PodParams are the backend-wide inputs of a pod spec.
type PodParams struct {
	// Namespace holds the pod and its Secret.
	Namespace string
	// ScalerName is the kici-scaler-name label.
	ScalerName string
	// StopGrace is the pod's terminationGracePeriodSeconds (whole seconds,
	// at least 1).
	StopGrace time.Duration
}

// BuildPod returns the agent pod of req and the Secret holding its token.
// The token is only in the Secret: BuildPod fails if it would appear in
// the pod spec. Errors: a job container built from the repository
// (container.build), a service name too long for a container name.
func BuildPod(req *scaler.SpawnRequest, p PodParams) (*corev1.Pod, *corev1.Secret, error) {
	if req.LabelSet == nil || req.LabelSet.Image == "" {
		return nil, nil, errors.New("the label set has no image")
	}
	name := PodName(req.AgentID)
	labels := map[string]string{
		scaler.LabelManaged: "true", scaler.LabelScalerName: LabelValue(p.ScalerName), scaler.LabelAgentID: LabelValue(req.AgentID),
	}
	annotations := map[string]string{AnnotationAgentID: req.AgentID}
	if req.JobID != "" {
		labels[scaler.LabelBoundJob] = LabelValue(req.JobID)
		labels[scaler.LabelRunID] = LabelValue(req.RunID)
		annotations[AnnotationJobID] = req.JobID
		annotations[AnnotationRunID] = req.RunID
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: labels, Annotations: annotations}
	secret := &corev1.Secret{
		ObjectMeta: *meta.DeepCopy(),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr(true),
		Data:       map[string][]byte{TokenKey: []byte(req.Token)},
	}
	secret.Name = SecretName(name)

	env := []corev1.EnvVar{}
	for _, kv := range scaler.AgentEnv(req) {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	env = append(env,
		corev1.EnvVar{Name: "KICI_AGENT_TOKEN_FILE", Value: TokenDir + "/" + TokenKey},
		corev1.EnvVar{Name: "KICI_WORK_DIR", Value: WorkDir},
		// The pod is the confinement, as the container is for the
		// container backend.
		corev1.EnvVar{Name: "KICI_ALLOW_UNCONFINED_STEPS", Value: "true"})

	ls := req.LabelSet
	mounts := []corev1.VolumeMount{
		{Name: "token", MountPath: TokenDir, ReadOnly: true},
		{Name: "work", MountPath: WorkDir},
	}
	volumes := []corev1.Volume{
		{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret.Name, DefaultMode: ptr(int32(0o440)),
			Items: []corev1.KeyToPath{{Key: TokenKey, Path: TokenKey}}}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	restricted := &corev1.SecurityContext{
		RunAsNonRoot:             ptr(true),
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	main := corev1.Container{
		Name: AgentContainer, Image: ls.Image, ImagePullPolicy: corev1.PullPolicy(ls.ImagePullPolicy),
		Command: []string{AgentBinary}, Env: env, VolumeMounts: mounts,
		Resources: resources(req.Limits), SecurityContext: restricted,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	var inits []corev1.Container
	var aliases []corev1.HostAlias
	if jc := req.Job; jc != nil && jc.Container != nil {
		c := jc.Container
		if c.Build != nil || c.Image == "" {
			return nil, nil, errors.New("container.build is not supported by kubernetes scalers: the job's image must be pullable by the cluster (container.image)")
		}
		volumes = append(volumes, corev1.Volume{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		// The agent binary is static: copied into the job's image, it runs
		// there and starts the steps as processes of the job's container.
		inits = append(inits, corev1.Container{
			Name: CopyContainer, Image: ls.Image, ImagePullPolicy: corev1.PullPolicy(ls.ImagePullPolicy),
			Command:         []string{"/bin/cp", AgentBinary, BinDir + "/kici-agent"},
			VolumeMounts:    []corev1.VolumeMount{{Name: "bin", MountPath: BinDir}},
			SecurityContext: restricted,
		})
		main.Name = JobContainer
		main.Image = c.Image
		main.ImagePullPolicy = corev1.PullIfNotPresent
		main.Command = []string{BinDir + "/kici-agent"}
		main.Env = append(main.Env, corev1.EnvVar{Name: "KICI_AGENT_JOB_CONTAINER", Value: "pod"})
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: "bin", MountPath: BinDir, ReadOnly: true})
		// The job's image decides its user, as on Docker; it may not gain
		// privileges beyond it.
		main.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)}
	}
	if jc := req.Job; jc != nil {
		var hosts []string
		for _, s := range jc.Services {
			svc, err := serviceContainer(s)
			if err != nil {
				return nil, nil, err
			}
			inits = append(inits, svc)
			hosts = append(hosts, s.Name)
		}
		if len(hosts) > 0 {
			// Steps reach `postgres:5432` as on the job network of Docker:
			// the pod's containers share one network namespace.
			aliases = []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: hosts}}
		}
	}
	grace := max(int64(p.StopGrace/time.Second), 1)
	pod := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			InitContainers:                inits,
			Containers:                    []corev1.Container{main},
			Volumes:                       volumes,
			HostAliases:                   aliases,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  ptr(ls.ServiceAccountName != ""),
			ServiceAccountName:            ls.ServiceAccountName,
			NodeSelector:                  ls.NodeSelector,
			Tolerations:                   tolerations(ls.Tolerations),
			// No Service variables: the steps learn nothing of the
			// cluster's services from their environment.
			EnableServiceLinks: ptr(false),
			SecurityContext: &corev1.PodSecurityContext{
				FSGroup:        ptr(int64(PodGroup)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	if ls.RuntimeClassName != "" {
		pod.Spec.RuntimeClassName = ptr(ls.RuntimeClassName)
	}
	if err := tokenAbsent(pod, req.Token); err != nil {
		return nil, nil, err
	}
	return pod, secret, nil
}

// serviceContainer is a job service as a sidecar of the pod: an init
// container with restartPolicy Always (Kubernetes sidecar containers), so
// it starts before the job's container and is stopped once it ends, and
// the pod completes with the job. Its `ports:` become container ports
// (what the agent waits for on 127.0.0.1 before the first step).
func serviceContainer(s lockfile.Service) (corev1.Container, error) {
	if len(ServicePrefix)+len(s.Name) > 63 {
		return corev1.Container{}, fmt.Errorf("service %q: name longer than %d characters cannot be a container name", s.Name, 63-len(ServicePrefix))
	}
	c := corev1.Container{
		Name: ServicePrefix + s.Name, Image: s.Image, ImagePullPolicy: corev1.PullIfNotPresent,
		Args: s.Command, RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)},
	}
	for _, port := range s.Ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: int32(port), Protocol: corev1.ProtocolTCP})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	return c, nil
}

// resources turns the label set's limits into requests equal to limits
// (the pod is scheduled for what it may use).
func resources(l scaler.Limits) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	if l.NanoCPUs > 0 {
		rl[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(l.NanoCPUs/1e6, 1), resource.DecimalSI)
	}
	if l.MemoryBytes > 0 {
		rl[corev1.ResourceMemory] = *resource.NewQuantity(l.MemoryBytes, resource.BinarySI)
	}
	if len(rl) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}
}

func tolerations(ts []scaler.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
			Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

// tokenAbsent refuses a pod spec that holds the token in any env value,
// argument or annotation: the spec is readable by anyone who may read
// pods, and the environment by the job's steps.
func tokenAbsent(pod *corev1.Pod, token string) error {
	if token == "" {
		return nil
	}
	for _, v := range pod.Annotations {
		if strings.Contains(v, token) {
			return errors.New("the agent token would appear in the pod's annotations")
		}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, e := range c.Env {
			if strings.Contains(e.Value, token) {
				return fmt.Errorf("the agent token would appear in the environment (%s) of container %s", e.Name, c.Name)
			}
		}
		for _, a := range slices.Concat(c.Command, c.Args) {
			if strings.Contains(a, token) {
				return fmt.Errorf("the agent token would appear in the command of container %s", c.Name)
			}
		}
	}
	return nil
}

var invalidLabelChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// LabelValue makes s a valid Kubernetes label value: characters other than
// A-Z a-z 0-9 . _ - become -, at most 63 characters, starting and ending
// with a letter or digit. The raw ids are kept in annotations.
func LabelValue(s string) string {
	s = invalidLabelChars.ReplaceAllString(s, "-")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.TrimFunc(s, func(r rune) bool { return !isAlnum(r) })
}

// PodName is the DNS-1123 label name of agent id's pod: lower case, other
// characters than a-z 0-9 - turned into -, at most 63 characters.
func PodName(agentID string) string {
	b := []byte(strings.ToLower(agentID))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	s := string(b)
	if len(s) > 63 {
		s = s[:63]
	}
	s = strings.Trim(s, "-")
	if s == "" {
		s = "kici-agent"
	}
	return s
}

// SecretName is the name of the token Secret of pod podName.
func SecretName(podName string) string { return podName + "-token" }

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func ptr[T any](v T) *T { return &v }
