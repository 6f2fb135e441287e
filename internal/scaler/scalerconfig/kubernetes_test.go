package scalerconfig

import (
	"errors"
	"strings"
	"testing"
)

const k8sConfig = `version: 1
scalers:
  - name: pods
    type: kubernetes
    maxAgents: 20
    maxConcurrentSpawns: 4
    namespace: ci-jobs
    kubeconfig: /etc/kici/kubeconfig
    orchestratorUrl: ws://kici.ci.svc:4000/ws
    warmPool: { enabled: true, size: 2 }
    labelSets:
      - labels: [linux, pod]
        image: kici:dev
        resources: { cpus: 1.5, memory: 2g }
        nodeSelector: { kubernetes.io/os: linux, pool: ci }
        tolerations:
          - { key: dedicated, value: ci, effect: NoSchedule }
          - { key: gpu, operator: Exists }
        serviceAccountName: kici-job
        runtimeClassName: gvisor
        env: { FOO: bar }
`

func TestKubernetesEntryParsesAndDefaults(t *testing.T) {
	cfg, err := Parse("scalers.yaml", []byte(k8sConfig))
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Scalers[0]
	if e.Type != TypeKubernetes || e.Namespace != "ci-jobs" || e.Kubeconfig != "/etc/kici/kubeconfig" {
		t.Fatalf("entry = %+v", e)
	}
	ls := e.LabelSets[0]
	if ls.ImagePullPolicy != "IfNotPresent" {
		t.Errorf("imagePullPolicy default = %q, want IfNotPresent", ls.ImagePullPolicy)
	}
	if ls.NodeSelector["pool"] != "ci" || ls.ServiceAccountName != "kici-job" || ls.RuntimeClassName != "gvisor" {
		t.Errorf("pod template = %+v", ls.KubernetesLabelSet)
	}
	if len(ls.Tolerations) != 2 || ls.Tolerations[0].Operator != "Equal" || ls.Tolerations[1].Operator != "Exists" {
		t.Errorf("tolerations = %+v", ls.Tolerations)
	}
	if l := cfg.Limits(ls); l.NanoCPUs != 1_500_000_000 || l.MemoryBytes != 2<<30 {
		t.Errorf("limits = %+v", l)
	}
}

func TestKubernetesEntryErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ from, to, field, msg string }{
		{"image: kici:dev", "", "scalers[0].labelSets[0].image", "required for kubernetes"},
		{"namespace: ci-jobs", "namespace: CI_Jobs", "scalers[0].namespace", "invalid namespace"},
		{"kubeconfig: /etc/kici/kubeconfig", "kubeconfig: kubeconfig", "scalers[0].kubeconfig", "absolute"},
		{"pool: ci }", "pool: 'a b' }", "scalers[0].labelSets[0].nodeSelector", "value"},
		{"{ key: gpu, operator: Exists }", "{ key: gpu, operator: Exists, value: x }", "scalers[0].labelSets[0].tolerations[1]", "takes no value"},
		{"{ key: gpu, operator: Exists }", "{ operator: Equal, value: x }", "scalers[0].labelSets[0].tolerations[1]", "empty key"},
		{"effect: NoSchedule", "effect: Sometimes", "scalers[0].labelSets[0].tolerations[0]", "effect must be"},
		{"serviceAccountName: kici-job", "serviceAccountName: Kici_Job", "scalers[0].labelSets[0].serviceAccountName", "DNS subdomain"},
		{"runtimeClassName: gvisor", "runtimeClassName: g.visor", "scalers[0].labelSets[0].runtimeClassName", "invalid name"},
		{"image: kici:dev", "image: kici:dev\n        imagePullPolicy: Sometimes", "scalers[0].labelSets[0].imagePullPolicy", "must be Always"},
	} {
		doc := strings.Replace(k8sConfig, c.from, c.to, 1)
		_, err := Parse("scalers.yaml", []byte(doc))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Msg, c.msg) {
			t.Errorf("%q → %q: err = %v, want field %s with %q", c.from, c.to, err, c.field, c.msg)
		}
	}
}

func TestKubernetesFieldsRefusedOnOtherTypes(t *testing.T) {
	for _, c := range []struct{ extra, field string }{
		{"    namespace: ci\n", "scalers[0].namespace"},
		{"    kubeconfig: /k\n", "scalers[0].kubeconfig"},
		{"        nodeSelector: { a: b }\n", "scalers[0].labelSets[0].nodeSelector"},
		{"        runtimeClassName: gvisor\n", "scalers[0].labelSets[0].runtimeClassName"},
	} {
		doc := "version: 1\nscalers:\n  - name: c\n    type: container\n    maxAgents: 1\n"
		if strings.HasPrefix(c.extra, "    n") || strings.HasPrefix(c.extra, "    k") {
			doc += c.extra + "    labelSets:\n      - labels: [x]\n        image: i\n"
		} else {
			doc += "    labelSets:\n      - labels: [x]\n        image: i\n" + c.extra
		}
		_, err := Parse("scalers.yaml", []byte(doc))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Msg, "kubernetes scalers only") {
			t.Errorf("%s: err = %v, want %s refused", c.field, err, c.field)
		}
	}
}

func TestKubernetesImmutableChanged(t *testing.T) {
	a := &Entry{Type: TypeKubernetes, KubernetesEntry: KubernetesEntry{Namespace: "a"}}
	b := &Entry{Type: TypeKubernetes, KubernetesEntry: KubernetesEntry{Namespace: "b"}}
	if !KubernetesImmutableChanged(a, b) {
		t.Error("a namespace change must be refused on reload")
	}
	if KubernetesImmutableChanged(a, a) {
		t.Error("no change reported as a change")
	}
}
