package kubernetes

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// apiCall is one request the fake API server saw.
type apiCall struct {
	method, path, query, contentType string
	body                             map[string]any
}

// The production client (newAPI: core/v1 alone, JSON) speaks the API
// server's REST paths, verbs, parameters and bodies for every call the
// backend makes, and decodes what the server answers.
func TestAPISpeaksCoreV1(t *testing.T) {
	var mu sync.Mutex
	var calls []apiCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := apiCall{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, contentType: r.Header.Get("Content-Type")}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			_ = json.Unmarshal(b, &c.body)
		}
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"agent-1","namespace":"ci","uid":"u-1"},"status":{"phase":"Running"}}`
		switch {
		case r.Method == "POST" && r.URL.Path == "/api/v1/namespaces/ci/pods":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, pod)
		case r.Method == "POST" && r.URL.Path == "/api/v1/namespaces/ci/secrets":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"agent-1-token","namespace":"ci"}}`)
		case r.Method == "GET" && r.URL.Path == "/api/v1/namespaces/ci/pods" && r.URL.Query().Get("watch") == "true":
			_, _ = io.WriteString(w, `{"type":"ADDED","object":`+pod+"}\n")
		case r.Method == "GET" && r.URL.Path == "/api/v1/namespaces/ci/pods":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[`+pod+`]}`)
		case r.Method == "GET" && r.URL.Path == "/api/v1/namespaces/ci/secrets":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"SecretList","metadata":{},"items":[{"metadata":{"name":"agent-1-token"}}]}`)
		case r.Method == "GET" && r.URL.Path == "/api/v1/namespaces/ci/events":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"EventList","metadata":{},"items":[{"metadata":{"name":"e1"},"reason":"BackOff","type":"Warning"}]}`)
		case r.Method == "PATCH" && r.URL.Path == "/api/v1/namespaces/ci/secrets/agent-1-token":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"agent-1-token"}}`)
		case r.Method == "DELETE":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Status","status":"Success"}`)
		default:
			http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusTeapot)
		}
	}))
	defer srv.Close()
	api, err := newAPI(&rest.Config{Host: srv.URL, QPS: ClientQPS, Burst: ClientBurst})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: "kici-managed=true,kici-scaler-name=pods"}

	created, err := api.Pods("ci").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "kici:dev"}}}}, metav1.CreateOptions{})
	if err != nil || created.UID != "u-1" || created.Status.Phase != corev1.PodRunning {
		t.Fatalf("create pod = %+v, %v", created, err)
	}
	if _, err := api.Secrets("ci").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-1-token"},
		StringData: map[string]string{"token": "kat_x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := api.Pods("ci").List(ctx, sel)
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "agent-1" || pods.ResourceVersion != "7" {
		t.Fatalf("list pods = %+v, %v", pods, err)
	}
	w, err := api.Pods("ci").Watch(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	w.Stop()
	if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || p.Name != "agent-1" {
		t.Fatalf("watch event = %+v", ev)
	}
	secrets, err := api.Secrets("ci").List(ctx, sel)
	if err != nil || len(secrets.Items) != 1 {
		t.Fatalf("list secrets = %+v, %v", secrets, err)
	}
	evs, err := api.Events("ci").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=agent-1,type=Warning"})
	if err != nil || len(evs.Items) != 1 || evs.Items[0].Reason != "BackOff" {
		t.Fatalf("list events = %+v, %v", evs, err)
	}
	if _, err := api.Secrets("ci").Patch(ctx, "agent-1-token", types.MergePatchType, []byte(`{"metadata":{"ownerReferences":[]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(10)
	if err := api.Pods("ci").Delete(ctx, "agent-1", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	if err := api.Secrets("ci").Delete(ctx, "agent-1-token", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []struct{ method, path, query, contentType, bodyKind string }{
		{"POST", "/api/v1/namespaces/ci/pods", "", "application/json", "Pod"},
		{"POST", "/api/v1/namespaces/ci/secrets", "", "application/json", "Secret"},
		{"GET", "/api/v1/namespaces/ci/pods", "labelSelector=kici-managed%3Dtrue%2Ckici-scaler-name%3Dpods", "", ""},
		{"GET", "/api/v1/namespaces/ci/pods", "labelSelector=kici-managed%3Dtrue%2Ckici-scaler-name%3Dpods&resourceVersion=7&watch=true", "", ""},
		{"GET", "/api/v1/namespaces/ci/secrets", "labelSelector=kici-managed%3Dtrue%2Ckici-scaler-name%3Dpods", "", ""},
		{"GET", "/api/v1/namespaces/ci/events", "fieldSelector=involvedObject.name%3Dagent-1%2Ctype%3DWarning", "", ""},
		{"PATCH", "/api/v1/namespaces/ci/secrets/agent-1-token", "", "application/merge-patch+json", ""},
		{"DELETE", "/api/v1/namespaces/ci/pods/agent-1", "", "application/json", "DeleteOptions"},
		{"DELETE", "/api/v1/namespaces/ci/secrets/agent-1-token", "", "application/json", "DeleteOptions"},
	}
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d: %+v", len(calls), len(want), calls)
	}
	for i, w := range want {
		c := calls[i]
		if c.method != w.method || c.path != w.path || c.query != w.query || !strings.HasPrefix(c.contentType, w.contentType) {
			t.Errorf("call %d = %s %s?%s (%s), want %s %s?%s (%s)", i, c.method, c.path, c.query, c.contentType, w.method, w.path, w.query, w.contentType)
		}
		if w.bodyKind != "" && (c.body["kind"] != w.bodyKind || c.body["apiVersion"] != "v1") {
			t.Errorf("call %d body = %v, want a v1 %s", i, c.body, w.bodyKind)
		}
	}
	if g := calls[7].body["gracePeriodSeconds"]; g != float64(10) {
		t.Errorf("pod delete grace = %v, want 10", g)
	}
}
