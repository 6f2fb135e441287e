package kubernetes

import (
	k8s "k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// clientsetAPI is API over a clientset's typed core/v1 client: the
// in-memory fake in these tests.
type clientsetAPI struct{ c corev1client.CoreV1Interface }

func apiOf(cs k8s.Interface) API { return clientsetAPI{c: cs.CoreV1()} }

func (a clientsetAPI) Pods(ns string) PodAPI       { return a.c.Pods(ns) }
func (a clientsetAPI) Secrets(ns string) SecretAPI { return a.c.Secrets(ns) }
func (a clientsetAPI) Events(ns string) EventAPI   { return a.c.Events(ns) }

// IsWatchListSemanticsUnSupported tells the pod informer's reflector
// (cache.ToListWatcherWithWatchListSemantics) that the in-memory fake
// cannot stream a list, as client-go's own informers learn from it.
func (a clientsetAPI) IsWatchListSemanticsUnSupported() bool { return true }
