package kubernetes

// The part of the Kubernetes core/v1 API the backend uses (pods, Secrets,
// events in one namespace), over client-go's generic REST client with a
// scheme of core/v1 alone. client-go's generated clientset registers every
// API group of Kubernetes in its scheme when the process starts: linked
// into the orchestrator it more than doubled the binary (38 → 84 MB) and
// an idle orchestrator's resident memory, whether or not a kubernetes
// scaler is configured. The generic client (gentype) is the one the
// generated clients are built on, so requests are the same.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
)

// API is what the backend calls of the core/v1 API, per namespace. The
// typed clients of client-go's clientset satisfy each part (Options.Client
// takes an adapter over one, e.g. its fake in tests).
type API interface {
	Pods(namespace string) PodAPI
	Secrets(namespace string) SecretAPI
	Events(namespace string) EventAPI
}

// PodAPI is the pod calls of the backend (create, delete, list, watch).
type PodAPI interface {
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// SecretAPI is the Secret calls of the backend (the agent token's).
type SecretAPI interface {
	Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Secret, error)
}

// EventAPI lists events (a pending pod's warnings).
type EventAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.EventList, error)
}

// coreScheme knows core/v1 and the meta/v1 options (list, create, delete,
// patch) the calls encode as query parameters or bodies.
var coreScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	return s
}()

var coreParams = runtime.NewParameterCodec(coreScheme)

// restAPI is API over one REST client of the cluster's core/v1.
type restAPI struct{ rc rest.Interface }

// newAPI returns the core/v1 API of the cluster cfg describes (JSON, the
// rate limits cfg carries). Errors: a configuration client-go refuses
// (TLS files, host).
func newAPI(cfg *rest.Config) (API, error) {
	c := *cfg
	gv := corev1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/api"
	c.NegotiatedSerializer = serializer.NewCodecFactory(coreScheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return restAPI{rc: rc}, nil
}

func (a restAPI) Pods(ns string) PodAPI {
	return gentype.NewClientWithList[*corev1.Pod, *corev1.PodList]("pods", a.rc, coreParams, ns,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

func (a restAPI) Secrets(ns string) SecretAPI {
	return gentype.NewClientWithList[*corev1.Secret, *corev1.SecretList]("secrets", a.rc, coreParams, ns,
		func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

func (a restAPI) Events(ns string) EventAPI {
	return gentype.NewClientWithList[*corev1.Event, *corev1.EventList]("events", a.rc, coreParams, ns,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}
