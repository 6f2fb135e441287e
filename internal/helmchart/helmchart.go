// Package helmchart renders the kici Helm chart (deploy/helm/kici) with the
// helm binary scripts/helm.sh installs, and decodes what it renders into
// objects, so tests can check the manifests a user would install (probes,
// grace, secrets, RBAC) with or without a cluster.
package helmchart

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"kici.dev/kici/internal/testutil/fixtures"
)

// HelmVersion is the Helm release scripts/helm.sh installs by default.
const HelmVersion = "v4.3.2"

// ChartDir returns the absolute path of deploy/helm/kici in this source
// tree (fixtures.RepoRoot: from any test's working directory, with or
// without -trimpath).
func ChartDir() string {
	return filepath.Join(fixtures.RepoRoot(), "deploy", "helm", "kici")
}

// HelmPath returns the helm binary: $KICI_TEST_HELM when set, else the one
// scripts/helm.sh installed under $KICI_TEST_CACHE (default
// /var/cache/kici-test, else ~/.cache/kici-test). Errors: none installed,
// naming the script that installs it.
func HelmPath() (string, error) {
	if p := os.Getenv("KICI_TEST_HELM"); p != "" {
		return p, nil
	}
	var roots []string
	if r := os.Getenv("KICI_TEST_CACHE"); r != "" {
		roots = append(roots, r)
	}
	roots = append(roots, "/var/cache/kici-test")
	if home, err := os.UserCacheDir(); err == nil {
		roots = append(roots, filepath.Join(home, "kici-test"))
	}
	for _, r := range roots {
		p := filepath.Join(r, "helm-"+HelmVersion, "helm")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("helm %s is not installed under %s: run `bash scripts/helm.sh` (make test-deps does)", HelmVersion, strings.Join(roots, ", "))
}

// Object is one rendered Kubernetes object, decoded from YAML as is.
type Object map[string]any

// Kind returns the object's kind ("Deployment", …).
func (o Object) Kind() string { s, _ := o["kind"].(string); return s }

// Name returns metadata.name.
func (o Object) Name() string { s, _ := Get(o, "metadata", "name").(string); return s }

// Get walks nested maps (string keys) and lists (int indexes) of v and
// returns the value at path, or nil when any step is missing.
func Get(v any, path ...any) any {
	if o, ok := v.(Object); ok {
		v = map[string]any(o)
	}
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k < 0 || k >= len(l) {
				return nil
			}
			v = l[k]
		default:
			return nil
		}
	}
	return v
}

// Render runs `helm template <release> <chart> --namespace <namespace>`
// with each values file (-f) and each key=value (--set) and returns the
// objects it prints, in order. Errors: helm's own message (a `fail` of the
// chart's value checks included), or YAML that does not decode.
func Render(helm, release, namespace string, valueFiles, set []string) ([]Object, error) {
	args := []string{"template", release, ChartDir(), "--namespace", namespace}
	for _, f := range valueFiles {
		args = append(args, "-f", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := Run(helm, args...)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// Run runs helm with args (in a private, empty helm home so no user's
// repositories or plugins matter) and returns its standard output.
// Errors carry helm's standard error.
func Run(helm string, args ...string) ([]byte, error) {
	home, err := os.MkdirTemp("", "kici-helm-home-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache",
		"HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Decode splits a multi-document YAML stream into objects, skipping empty
// documents. Errors: a document that is not a YAML mapping.
func Decode(stream []byte) ([]Object, error) {
	var objs []Object
	for i, doc := range splitDocuments(stream) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var o Object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, fmt.Errorf("rendered document %d: %w", i, err)
		}
		if o == nil {
			continue
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		return nil, errors.New("helm rendered no object")
	}
	return objs, nil
}

// splitDocuments splits at lines that are exactly "---".
func splitDocuments(stream []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for _, line := range bytes.SplitAfter(stream, []byte("\n")) {
		if string(bytes.TrimRight(line, "\r\n")) == "---" {
			docs = append(docs, cur)
			cur = nil
			continue
		}
		cur = append(cur, line...)
	}
	return append(docs, cur)
}

// stripComments drops whole-line comments (helm prints "# Source: …").
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// Find returns the objects of kind, in order.
func Find(objs []Object, kind string) []Object {
	var out []Object
	for _, o := range objs {
		if o.Kind() == kind {
			out = append(out, o)
		}
	}
	return out
}
