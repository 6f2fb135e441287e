package kubernetes

// How the backend reaches its cluster: the client configuration (a
// kubeconfig, the in-cluster service account, or $KUBECONFIG), its rate
// limits, and the namespace its pods go to.

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client rate limits of the backend's API client. client-go's defaults
// (5 requests/s, bursts of 10) throttle a burst of spawns, each a Secret
// create, a pod create and a patch: ten spawns at once waited seconds.
const (
	ClientQPS   = 50
	ClientBurst = 100
)

// restConfig is the client configuration: kubeconfig when set, else the
// in-cluster service account (rest.InClusterConfig), else $KUBECONFIG,
// with the ClientQPS and ClientBurst rate limits.
func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := loadRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = ClientQPS, ClientBurst
	return cfg, nil
}

func loadRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return cfg, nil
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		cfg, kerr := clientcmd.BuildConfigFromFlags("", env)
		if kerr != nil {
			return nil, fmt.Errorf("KUBECONFIG %s: %w", env, kerr)
		}
		return cfg, nil
	}
	return nil, fmt.Errorf("no cluster configuration: not running in a pod (%v), no kubeconfig in the scaler entry and KUBECONFIG unset", err)
}

// inClusterNamespaceFile is where a pod finds its own namespace.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// namespace is the entry's namespace, else the orchestrator pod's own,
// else "default".
func namespace(ns string) string {
	if ns != "" {
		return ns
	}
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return "default"
}
