package helmchart

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/scaler/scalerconfig"
)

// helmOrFail returns the cached helm binary; make test installs it
// (scripts/test-deps.sh runs scripts/helm.sh), so a missing one fails.
func helmOrFail(t *testing.T) string {
	t.Helper()
	h, err := HelmPath()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// valueSets are the chart's example value files (deploy/helm/kici/ci), each
// a way a user installs it; helm lint reads the same directory.
var valueSets = []string{"minimal-values.yaml", "existing-secrets-values.yaml", "no-scaler-values.yaml"}

// plainSecrets are the credential values of the example files: none may
// appear in any rendered object but a Secret.
var plainSecrets = []string{"kici:secret@db.example.com", "s3-secret-example", "AKIAEXAMPLE"}

func TestChartLints(t *testing.T) {
	helm := helmOrFail(t)
	for _, vs := range valueSets {
		if out, err := Run(helm, "lint", "--strict", ChartDir(), "-f", filepath.Join(ChartDir(), "ci", vs)); err != nil {
			t.Errorf("helm lint with %s: %v\n%s", vs, err, out)
		}
	}
}

// TestChartRendersWhatAUserNeeds renders each example value set and checks
// what a user relies on: probes on the orchestrator's real probe routes,
// a termination grace covering the drain, no credential in plain text
// outside Secrets, the scaler's RBAC namespaced and minimal, a Service
// and PodDisruptionBudget that select the pods, and stateless replicas.
func TestChartRendersWhatAUserNeeds(t *testing.T) {
	helm := helmOrFail(t)
	for _, vs := range valueSets {
		t.Run(strings.TrimSuffix(vs, "-values.yaml"), func(t *testing.T) {
			objs, err := Render(helm, "ci", "ci-ns", []string{filepath.Join(ChartDir(), "ci", vs)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkChart(t, objs, vs)
		})
	}
}

func checkChart(t *testing.T, objs []Object, valueSet string) {
	deps := Find(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deps))
	}
	dep := deps[0]
	pod := Get(dep, "spec", "template").(map[string]any)
	podLabels := Get(pod, "metadata", "labels").(map[string]any)
	c := Get(pod, "spec", "containers", 0).(map[string]any)
	env := map[string]map[string]any{}
	for _, e := range Get(c, "env").([]any) {
		m := e.(map[string]any)
		env[m["name"].(string)] = m
	}
	plain := func(name string) string { s, _ := env[name]["value"].(string); return s }

	// Probes: on the container's named port, which is KICI_PORT, and on
	// routes the orchestrator serves without authentication.
	port := Get(c, "ports", 0, "containerPort")
	if fmt.Sprint(port) != plain("KICI_PORT") || Get(c, "ports", 0, "name") != "http" {
		t.Errorf("container port %v named %v, KICI_PORT %q", port, Get(c, "ports", 0, "name"), plain("KICI_PORT"))
	}
	public := publicGETRoutes(t)
	for probe, want := range map[string]string{"livenessProbe": "/health", "startupProbe": "/health", "readinessProbe": "/ready"} {
		path, _ := Get(c, probe, "httpGet", "path").(string)
		if path != want || Get(c, probe, "httpGet", "port") != "http" {
			t.Errorf("%s = %v on port %v, want %s on http", probe, path, Get(c, probe, "httpGet", "port"), want)
		}
		if !public[path] {
			t.Errorf("%s path %q is not a public GET route of the orchestrator", probe, path)
		}
	}
	if to, _ := Get(c, "readinessProbe", "timeoutSeconds").(uint64); to < 3 {
		t.Errorf("readiness timeout %v s: the database check takes up to 2 s", Get(c, "readinessProbe", "timeoutSeconds"))
	}

	// Drain: the pod may take the preStop wait, the shutdown grace and 30 s.
	graceMs, err := strconv.ParseInt(plain("KICI_SHUTDOWN_GRACE_MS"), 10, 64)
	if err != nil {
		t.Fatalf("KICI_SHUTDOWN_GRACE_MS %q: %v", plain("KICI_SHUTDOWN_GRACE_MS"), err)
	}
	preStop := int64(0)
	if s, ok := Get(c, "lifecycle", "preStop", "sleep", "seconds").(uint64); ok {
		preStop = int64(s)
	}
	tg, _ := Get(pod, "spec", "terminationGracePeriodSeconds").(uint64)
	if int64(tg) < (graceMs+999)/1000+30+preStop {
		t.Errorf("terminationGracePeriodSeconds %d < preStop %d + shutdown grace %d ms + 30 s", tg, preStop, graceMs)
	}

	// Credentials come from Secrets, never plain env.
	for name, e := range env {
		sensitive := len(config.SensitiveEnv([]string{name + "=x"})) > 0 || strings.HasPrefix(name, "AWS_")
		if sensitive && (e["value"] != nil || Get(e, "valueFrom", "secretKeyRef", "name") == nil) {
			t.Errorf("%s is not read from a Secret: %v", name, e)
		}
	}
	for _, want := range []string{"KICI_DATABASE_URL", "KICI_SECRET_KEY", "KICI_BOOTSTRAP_ADMIN_TOKEN"} {
		if env[want] == nil {
			t.Errorf("%s is not set: replicas need the shared database, master key and an admin token", want)
		}
	}
	for _, o := range objs {
		if o.Kind() == "Secret" {
			continue
		}
		b, _ := yaml.Marshal(o)
		for _, s := range plainSecrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s %s holds the credential %q in plain text", o.Kind(), o.Name(), s)
			}
		}
	}
	for _, s := range Find(objs, "Secret") {
		if k, ok := Get(s, "data", "secretKey").(string); ok {
			key, _ := base64.StdEncoding.DecodeString(k)
			if b, err := hex.DecodeString(string(key)); err != nil || len(b) != 32 {
				t.Errorf("generated master key %q is not 64 hex digits", key)
			}
		}
	}

	// Service links would put KICI_SERVICE_HOST, KICI_PORT=tcp://… of a
	// Service named kici into the environment, and the orchestrator
	// refuses unknown KICI_* variables (seen on a real cluster).
	if Get(pod, "spec", "enableServiceLinks") != false {
		t.Errorf("enableServiceLinks = %v, want false", Get(pod, "spec", "enableServiceLinks"))
	}

	// Stateless replicas: S3 and PostgreSQL shared, the data dir on an emptyDir.
	if plain("KICI_STORAGE_TYPE") != "s3" || plain("KICI_STORAGE_BUCKET") == "" {
		t.Errorf("storage %q bucket %q, want s3 with a bucket", plain("KICI_STORAGE_TYPE"), plain("KICI_STORAGE_BUCKET"))
	}
	vols := map[string]map[string]any{}
	for _, v := range Get(pod, "spec", "volumes").([]any) {
		vols[v.(map[string]any)["name"].(string)] = v.(map[string]any)
	}
	onEmptyDir := false
	for _, m := range Get(c, "volumeMounts").([]any) {
		mp := m.(map[string]any)
		if strings.HasPrefix(plain("KICI_DATA_DIR")+"/", mp["mountPath"].(string)+"/") && vols[mp["name"].(string)]["emptyDir"] != nil {
			onEmptyDir = true
		}
	}
	if !onEmptyDir {
		t.Errorf("KICI_DATA_DIR %q is not on an emptyDir", plain("KICI_DATA_DIR"))
	}
	if Get(pod, "spec", "securityContext", "runAsNonRoot") != true || Get(c, "securityContext", "readOnlyRootFilesystem") != true ||
		Get(c, "securityContext", "allowPrivilegeEscalation") != false {
		t.Errorf("pod/container security context: %v / %v", Get(pod, "spec", "securityContext"), Get(c, "securityContext"))
	}

	// The Service and the PodDisruptionBudget select these pods.
	svcs := Find(objs, "Service")
	if len(svcs) != 1 || !selects(Get(svcs[0], "spec", "selector"), podLabels) ||
		Get(svcs[0], "spec", "ports", 0, "targetPort") != "http" {
		t.Errorf("Service: %v", svcs)
	}
	replicas, _ := Get(dep, "spec", "replicas").(uint64)
	pdbs := Find(objs, "PodDisruptionBudget")
	if replicas > 1 && (len(pdbs) != 1 || !selects(Get(pdbs[0], "spec", "selector", "matchLabels"), podLabels)) {
		t.Errorf("%d replicas and PodDisruptionBudgets %v", replicas, pdbs)
	}

	checkScalerAndRBAC(t, objs, pod, c, env, valueSet)
}

// checkScalerAndRBAC: with the scaler, scalers.yaml names a kubernetes
// scaler in the job namespace and the orchestrators' service account holds
// exactly the scaler's verbs there; without it, no Role and no token.
func checkScalerAndRBAC(t *testing.T, objs []Object, pod, c map[string]any, env map[string]map[string]any, valueSet string) {
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if len(Find(objs, kind)) > 0 {
			t.Errorf("the chart renders a %s: the scaler needs nothing cluster-wide", kind)
		}
	}
	roles, bindings, cms := Find(objs, "Role"), Find(objs, "RoleBinding"), Find(objs, "ConfigMap")
	if valueSet == "no-scaler-values.yaml" {
		if len(roles)+len(bindings)+len(cms) > 0 || env["KICI_SCALER_CONFIG_PATH"] != nil ||
			Get(pod, "spec", "automountServiceAccountToken") != false {
			t.Errorf("scaler disabled, yet Roles %d, RoleBindings %d, ConfigMaps %d, KICI_SCALER_CONFIG_PATH %v, automount %v",
				len(roles), len(bindings), len(cms), env["KICI_SCALER_CONFIG_PATH"], Get(pod, "spec", "automountServiceAccountToken"))
		}
		return
	}
	if len(cms) != 1 || len(roles) != 1 || len(bindings) != 1 {
		t.Fatalf("ConfigMaps %d, Roles %d, RoleBindings %d, want 1 each", len(cms), len(roles), len(bindings))
	}
	var sc struct {
		Version int `yaml:"version"`
		Scalers []struct {
			Name      string           `yaml:"name"`
			Type      string           `yaml:"type"`
			Namespace string           `yaml:"namespace"`
			MaxAgents int              `yaml:"maxAgents"`
			LabelSets []map[string]any `yaml:"labelSets"`
		} `yaml:"scalers"`
	}
	if err := yaml.Unmarshal([]byte(Get(cms[0], "data", "scalers.yaml").(string)), &sc); err != nil {
		t.Fatalf("scalers.yaml: %v", err)
	}
	if sc.Version != 1 || len(sc.Scalers) != 1 || sc.Scalers[0].Type != "kubernetes" || sc.Scalers[0].MaxAgents < 1 || len(sc.Scalers[0].LabelSets) == 0 {
		t.Fatalf("scalers.yaml = %+v", sc)
	}
	s := sc.Scalers[0]
	// The orchestrator's own parser must accept the file.
	if _, err := scalerconfig.Parse("scalers.yaml", []byte(Get(cms[0], "data", "scalers.yaml").(string))); err != nil {
		t.Errorf("the orchestrator refuses the chart's scalers.yaml: %v", err)
	}
	for _, ls := range s.LabelSets {
		if img, _ := ls["image"].(string); img == "" || ls["labels"] == nil {
			t.Errorf("label set without image or labels: %v", ls)
		}
		for k := range ls {
			if !slices.Contains([]string{"labels", "image", "imagePullPolicy", "resources", "nodeSelector", "tolerations", "serviceAccountName", "runtimeClassName"}, k) {
				t.Errorf("label set field %q is not one of the kubernetes scaler's", k)
			}
		}
	}
	path := Get(env["KICI_SCALER_CONFIG_PATH"], "value")
	mounted := false
	for _, m := range Get(c, "volumeMounts").([]any) {
		mp := m.(map[string]any)
		if path == mp["mountPath"].(string)+"/scalers.yaml" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("KICI_SCALER_CONFIG_PATH %v is not where the ConfigMap is mounted", path)
	}

	role := roles[0]
	if ns := Get(role, "metadata", "namespace"); ns != s.Namespace {
		t.Errorf("Role in namespace %v, job pods in %q", ns, s.Namespace)
	}
	got := map[string][]string{}
	for _, r := range Get(role, "rules").([]any) {
		for _, g := range Get(r, "apiGroups").([]any) {
			if g != "" {
				t.Errorf("rule on API group %q: the scaler uses core pods and secrets only", g)
			}
		}
		for _, res := range Get(r, "resources").([]any) {
			for _, v := range Get(r, "verbs").([]any) {
				got[res.(string)] = append(got[res.(string)], v.(string))
			}
		}
	}
	want := map[string][]string{"pods": {"create", "get", "list", "watch", "delete"}, "secrets": {"create", "patch", "delete", "list"}}
	for res, verbs := range got {
		slices.Sort(verbs)
		w := slices.Clone(want[res])
		slices.Sort(w)
		if !slices.Equal(verbs, w) {
			t.Errorf("Role grants %v on %s, want exactly %v", verbs, res, want[res])
		}
	}
	if len(got) != len(want) {
		t.Errorf("Role covers %v, want pods and secrets only", got)
	}
	b := bindings[0]
	if Get(b, "metadata", "namespace") != s.Namespace || Get(b, "roleRef", "kind") != "Role" || Get(b, "roleRef", "name") != role.Name() ||
		Get(b, "subjects", 0, "name") != Get(pod, "spec", "serviceAccountName") || len(Get(b, "subjects").([]any)) != 1 {
		t.Errorf("RoleBinding %v does not bind the Role to the pods' service account %v alone", b, Get(pod, "spec", "serviceAccountName"))
	}
}

// publicGETRoutes lists the paths the orchestrator's admin router answers
// to an unauthenticated GET with 200 (its real handlers, probed through
// httptest), among the public GET routes of its OpenAPI document.
func publicGETRoutes(t *testing.T) map[string]bool {
	t.Helper()
	router := api.NewRouter(api.Deps{Version: "test"})
	out := map[string]bool{}
	paths, _ := api.OpenAPIDocument("test")["paths"].(map[string]map[string]any)
	for p, ops := range paths {
		get, ok := ops["get"].(map[string]any)
		if sec, _ := get["security"].([]any); !ok || sec == nil || len(sec) != 0 || strings.Contains(p, "{") {
			continue
		}
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code == http.StatusOK {
			out[p] = true
		}
	}
	if !out["/health"] {
		t.Fatalf("the orchestrator's router does not answer GET /health with 200 (public routes: %v)", out)
	}
	return out
}

// selects reports whether every key=value of selector is in labels.
func selects(selector any, labels map[string]any) bool {
	m, ok := selector.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Values that would deploy a broken cluster stop the install, saying what
// to set.
func TestChartRefusesBrokenValues(t *testing.T) {
	helm := helmOrFail(t)
	ok := []string{"database.url=postgres://k@db/kici", "storage.bucket=b"}
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"storage.bucket=b"}, "database.existingSecret"},
		{[]string{"database.url=postgres://k@db/kici"}, "storage.bucket"},
		{append(ok, "database.url=mysql://k@db/kici"), "postgres://"},
		{append(ok, "secretKey.value=short"), "64 hex digits"},
		{append(ok, "replicaCount=0"), "replicaCount"},
		{append(ok, "kubernetesScaler.name=Bad_Name"), "kubernetesScaler.name"},
	} {
		_, err := Render(helm, "bad", "ns", nil, tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: err = %v, want one naming %q", tc.set, err, tc.want)
		}
	}
}

// The release name and namespace flow into the objects: two releases in
// two namespaces never share a name, a Role or a job namespace.
func TestChartNamesFollowTheRelease(t *testing.T) {
	helm := helmOrFail(t)
	objs, err := Render(helm, "ci-two", "team-b", nil, []string{"database.url=postgres://k@db/kici", "storage.bucket=b", "shutdownGraceMs=0", "preStopSleepSeconds=0"})
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^ci-two-kici(-[a-z]+)?$`)
	for _, o := range objs {
		if !name.MatchString(o.Name()) {
			t.Errorf("%s %q is not named after the release", o.Kind(), o.Name())
		}
	}
	if ns := Get(Find(objs, "Role")[0], "metadata", "namespace"); ns != "team-b" {
		t.Errorf("Role namespace %v, want the release's team-b", ns)
	}
	// A zero grace still leaves the 30 s for the hand-over and the exit.
	if tg := Get(Find(objs, "Deployment")[0], "spec", "template", "spec", "terminationGracePeriodSeconds"); fmt.Sprint(tg) != "30" {
		t.Errorf("terminationGracePeriodSeconds = %v with no grace and no preStop, want 30", tg)
	}
}
