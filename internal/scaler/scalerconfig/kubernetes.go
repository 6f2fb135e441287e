package scalerconfig

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"kici.dev/kici/internal/boundedre"
)

// TypeKubernetes runs each agent in a pod of its own on a Kubernetes
// cluster (docs/kubernetes.md, "The kubernetes scaler").
const TypeKubernetes BackendType = "kubernetes"

// KubernetesEntry are the kubernetes-only fields of a scaler entry.
type KubernetesEntry struct {
	// Namespace holds the agents' pods and token Secrets (default: the
	// orchestrator's own namespace when it runs in a pod, else "default").
	Namespace string `yaml:"namespace" json:"namespace,omitempty"`
	// Kubeconfig is the kubeconfig file to authenticate with (absolute);
	// empty: the in-cluster service account, else $KUBECONFIG.
	Kubeconfig string `yaml:"kubeconfig" json:"kubeconfig,omitempty"`
}

// KubernetesLabelSet are the pod-template fields of a kubernetes label
// set; image, imagePullPolicy, resources and env are the common fields.
// Their names and meaning are the Kubernetes pod spec's.
type KubernetesLabelSet struct {
	// NodeSelector restricts the pods to nodes with these labels.
	NodeSelector map[string]string `yaml:"nodeSelector" json:"nodeSelector,omitempty"`
	// Tolerations let the pods onto nodes with matching taints.
	Tolerations []Toleration `yaml:"tolerations" json:"tolerations,omitempty"`
	// ServiceAccountName runs the pods as this service account, whose API
	// token is then mounted; without it no API token is mounted at all.
	ServiceAccountName string `yaml:"serviceAccountName" json:"serviceAccountName,omitempty"`
	// RuntimeClassName selects the container runtime handler (e.g. a
	// gVisor or Kata runtime class).
	RuntimeClassName string `yaml:"runtimeClassName" json:"runtimeClassName,omitempty"`
}

// Toleration is one Kubernetes pod toleration (core/v1 Toleration).
type Toleration struct {
	// Key is the taint key; empty only with operator Exists (tolerates
	// every taint).
	Key string `yaml:"key" json:"key,omitempty"`
	// Operator is Equal (default) or Exists.
	Operator string `yaml:"operator" json:"operator,omitempty"`
	// Value must equal the taint's value (Equal); empty with Exists.
	Value string `yaml:"value" json:"value,omitempty"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute; empty matches
	// every effect.
	Effect string `yaml:"effect" json:"effect,omitempty"`
}

var (
	// dnsLabelRe is an RFC 1123 label (namespaces, runtime classes).
	dnsLabelRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// dnsSubdomainRe is an RFC 1123 subdomain (service accounts).
	dnsSubdomainRe = boundedre.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`, 1, 253)
	// k8sNameRe is the name part of a Kubernetes qualified name or a
	// label value (63 characters at most).
	k8sNameRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
)

// validateKubernetes checks the kubernetes fields of e (path p): on a
// kubernetes entry they are checked and defaulted, on any other type they
// are refused.
func (e *Entry) validateKubernetes(p string) error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{File: e.file, Field: p + field, Msg: fmt.Sprintf(format, a...)}
	}
	if e.Type != TypeKubernetes {
		if e.Namespace != "" {
			return bad(".namespace", "applies to kubernetes scalers only")
		}
		if e.Kubeconfig != "" {
			return bad(".kubeconfig", "applies to kubernetes scalers only")
		}
		for j, ls := range e.LabelSets {
			if ls == nil {
				continue
			}
			k := ls.KubernetesLabelSet
			lp := fmt.Sprintf(".labelSets[%d].", j)
			for _, c := range []struct {
				field string
				set   bool
			}{{"nodeSelector", len(k.NodeSelector) > 0}, {"tolerations", len(k.Tolerations) > 0},
				{"serviceAccountName", k.ServiceAccountName != ""}, {"runtimeClassName", k.RuntimeClassName != ""}} {
				if c.set {
					return bad(lp+c.field, "applies to kubernetes scalers only")
				}
			}
		}
		return nil
	}
	if e.Namespace != "" && !dnsLabelRe.MatchString(e.Namespace) {
		return bad(".namespace", "invalid namespace %q: want 1–63 characters of a-z, 0-9 and -, starting and ending with a letter or digit", e.Namespace)
	}
	if e.Kubeconfig != "" && !filepath.IsAbs(e.Kubeconfig) {
		return bad(".kubeconfig", "must be an absolute path")
	}
	for j, ls := range e.LabelSets {
		if ls == nil {
			continue
		}
		lp := fmt.Sprintf(".labelSets[%d]", j)
		switch {
		case ls.Image == "":
			return bad(lp+".image", "required for kubernetes scalers (an image holding /usr/local/bin/kici-agent, e.g. `make image`)")
		case strings.ContainsAny(ls.Image, " \t\n"):
			return bad(lp+".image", "invalid image %q: no white space allowed", ls.Image)
		case ls.BinaryPath != "":
			return bad(lp+".binaryPath", "applies to bare-metal scalers only")
		}
		switch ls.ImagePullPolicy {
		case "":
			ls.ImagePullPolicy = "IfNotPresent"
		case "Always", "IfNotPresent", "Never":
		default:
			return bad(lp+".imagePullPolicy", "must be Always, IfNotPresent or Never (got %q)", ls.ImagePullPolicy)
		}
		k := &ls.KubernetesLabelSet
		for key, v := range k.NodeSelector {
			if err := checkQualifiedName(key); err != nil {
				return bad(lp+".nodeSelector", "key %q: %v", key, err)
			}
			if v != "" && !k8sNameRe.MatchString(v) {
				return bad(lp+".nodeSelector", "value %q of %q: want at most 63 characters of A-Z, a-z, 0-9 and . _ -, starting and ending with a letter or digit", v, key)
			}
		}
		for t := range k.Tolerations {
			if err := checkToleration(&k.Tolerations[t]); err != nil {
				return bad(fmt.Sprintf("%s.tolerations[%d]", lp, t), "%v", err)
			}
		}
		if k.ServiceAccountName != "" && !dnsSubdomainRe.MatchString(k.ServiceAccountName) {
			return bad(lp+".serviceAccountName", "invalid name %q: want a DNS subdomain (a-z, 0-9, - and .)", k.ServiceAccountName)
		}
		if k.RuntimeClassName != "" && !dnsLabelRe.MatchString(k.RuntimeClassName) {
			return bad(lp+".runtimeClassName", "invalid name %q: want 1–63 characters of a-z, 0-9 and -", k.RuntimeClassName)
		}
	}
	return nil
}

// checkQualifiedName checks a Kubernetes label key: [prefix/]name, the
// prefix a DNS subdomain, the name as k8sNameRe.
func checkQualifiedName(k string) error {
	prefix, name, ok := strings.Cut(k, "/")
	if !ok {
		name = prefix // no prefix: the whole key is the name
	} else if !dnsSubdomainRe.MatchString(prefix) {
		return fmt.Errorf("prefix %q is not a DNS subdomain", prefix)
	}
	if !k8sNameRe.MatchString(name) {
		return fmt.Errorf("want [prefix/]name, the name at most 63 characters of A-Z, a-z, 0-9 and . _ -, starting and ending with a letter or digit")
	}
	return nil
}

// checkToleration checks and defaults one toleration (the Kubernetes API's
// rules: Exists has no value; an empty key needs Exists).
func checkToleration(t *Toleration) error {
	switch t.Operator {
	case "":
		t.Operator = "Equal"
	case "Equal", "Exists":
	default:
		return fmt.Errorf("operator must be Equal or Exists (got %q)", t.Operator)
	}
	if t.Key == "" && t.Operator != "Exists" {
		return fmt.Errorf("an empty key needs operator Exists")
	}
	if t.Key != "" {
		if err := checkQualifiedName(t.Key); err != nil {
			return fmt.Errorf("key %q: %v", t.Key, err)
		}
	}
	if t.Operator == "Exists" && t.Value != "" {
		return fmt.Errorf("operator Exists takes no value")
	}
	if t.Value != "" && !k8sNameRe.MatchString(t.Value) {
		return fmt.Errorf("value %q: want at most 63 characters of A-Z, a-z, 0-9 and . _ -", t.Value)
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return fmt.Errorf("effect must be NoSchedule, PreferNoSchedule or NoExecute (got %q)", t.Effect)
	}
	return nil
}

// KubernetesImmutableChanged reports whether a reload changes a kubernetes
// scaler's fields its running backend keeps (namespace, kubeconfig).
func KubernetesImmutableChanged(a, b *Entry) bool {
	if a.Type != TypeKubernetes || b.Type != TypeKubernetes {
		return false
	}
	return a.Namespace != b.Namespace || a.Kubeconfig != b.Kubeconfig
}
