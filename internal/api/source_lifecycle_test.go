package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// Sources of every kind can be paused, resumed and deleted; auditors and
// tokens scoped to another routing key cannot; deletes keep runs and are
// audited with the change; toggles are audited by the write recorder.
func TestSourceDeleteEnableDisable(t *testing.T) {
	e := newSecEnv(t)
	ctx := context.Background()
	base := apitypes.AdminPrefix + "/generic-sources/"
	code, m, _ := e.do("POST", apitypes.AdminPrefix+"/generic-sources", e.owner, `{"orgId":"acme","name":"hooks"}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, m)
	}
	src := m["source"].(map[string]any)
	id, rk := src["id"].(string), src["routingKey"].(string)
	gh := &store.Source{ID: "src-gh", OrgID: "acme", Name: "gh", Provider: provider.GitHub, RoutingKey: "github:9",
		VerificationMethod: VerificationHMAC, Enabled: true}
	if err := e.st.CreateSourceWithSettings(ctx, gh, &store.SourceSettings{GitHub: &store.GitHubConfig{Token: "t"}},
		[]*store.SourceSecret{{Secret: "0123456789abcdef"}}); err != nil {
		t.Fatal(err)
	}
	run := &store.Run{ID: "run-1", WorkflowName: "ci", Status: status.RunSuccess, SourceID: id, OrgID: "acme", CreatedAt: time.Now().UTC()}
	if err := e.st.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	enabled := func(id string) bool {
		t.Helper()
		s, err := e.st.GetSource(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Enabled
	}

	// Auditors are refused every write, naming the permission.
	for _, c := range []struct{ method, path, perm string }{
		{"DELETE", base + id, "source.delete"}, {"POST", base + id + "/enable", "source.update"}, {"POST", base + id + "/disable", "source.update"}} {
		code, m, _ := e.do(c.method, c.path, e.auditor, "")
		if code != http.StatusForbidden || !strings.Contains(m["error"].(string), c.perm) {
			t.Fatalf("auditor %s %s: %d %v, want 403 naming %s", c.method, c.path, code, m, c.perm)
		}
	}
	// A token of another routing key is refused; one of this key may act.
	_, other := e.createToken(auth.RoleOwner, "generic:acme:someone-else")
	_, mine := e.createToken(auth.RoleAdmin, rk)
	for _, c := range []struct{ method, path string }{{"DELETE", base + id}, {"POST", base + id + "/disable"}, {"POST", base + "src-gh/disable"}} {
		if code, m, _ := e.do(c.method, c.path, other, ""); code != http.StatusForbidden || m["error"] != msgScopeMismatch {
			t.Fatalf("other key %s %s: %d %v, want 403 scope mismatch", c.method, c.path, code, m)
		}
	}
	if code, m, _ := e.do("POST", base+"src-gh/disable", mine, ""); code != http.StatusForbidden {
		t.Fatalf("scoped token disabling another key's source: %d %v", code, m)
	}
	if !enabled(id) || !enabled("src-gh") {
		t.Fatal("a refused request changed a source")
	}

	// Disable, idempotently; enable; both kinds.
	for _, tok := range []string{mine, e.owner} {
		if code, m, _ := e.do("POST", base+id+"/disable", tok, ""); code != 200 || m["enabled"] != false {
			t.Fatalf("disable: %d %v", code, m)
		}
	}
	if enabled(id) {
		t.Fatal("source still enabled after disable")
	}
	if code, m := e.get(base + id); code != 200 || m["source"].(map[string]any)["enabled"] != false {
		t.Fatalf("GET disabled source: %d %v", code, m)
	}
	if code, m, _ := e.do("POST", base+"src-gh/disable", e.owner, ""); code != 200 || m["enabled"] != false || enabled("src-gh") {
		t.Fatalf("disable github source: %d %v", code, m)
	}
	if code, m, _ := e.do("POST", base+id+"/enable", e.owner, ""); code != 200 || m["enabled"] != true || !enabled(id) {
		t.Fatalf("enable: %d %v", code, m)
	}
	for _, p := range []string{"/enable", "/disable"} {
		if code, m, _ := e.do("POST", base+"nope"+p, e.owner, ""); code != 404 || m["error"] != "Source not found" {
			t.Fatalf("%s unknown: %d %v", p, code, m)
		}
	}
	toggles, err := e.st.ListAccessLog(ctx, store.AccessLogFilter{Action: "POST " + apitypes.AdminPrefix + "/generic-sources/{id}/disable"})
	if err != nil {
		t.Fatal(err)
	}
	if len(toggles) != 3 || toggles[0].Resource != base+"src-gh/disable" {
		t.Fatalf("disable audit rows = %+v, want 3 (two for %s, one for src-gh)", toggles, id)
	}

	// Delete: 200 once, then 404; the run stays; one audit row.
	if code, m, _ := e.do("DELETE", base+id, mine, ""); code != 200 || m["deleted"] != true {
		t.Fatalf("delete: %d %v", code, m)
	}
	if code, m := e.get(base + id); code != 404 {
		t.Fatalf("GET deleted source: %d %v", code, m)
	}
	if code, m, _ := e.do("DELETE", base+id, e.owner, ""); code != 404 || m["error"] != "Source not found" {
		t.Fatalf("second delete: %d %v", code, m)
	}
	if code, m := e.get(apitypes.AdminPrefix + "/runs/run-1"); code != 200 {
		t.Fatalf("run of a deleted source: %d %v", code, m)
	}
	if secs, _ := e.st.ListSourceSecrets(ctx, id, false); len(secs) != 0 {
		t.Fatalf("secrets of a deleted source: %+v", secs)
	}
	if code, m, _ := e.do("DELETE", base+"src-gh", e.owner, ""); code != 200 || m["deleted"] != true {
		t.Fatalf("delete github source: %d %v", code, m)
	}
	dels, err := e.st.ListAccessLog(ctx, store.AccessLogFilter{Action: "source.delete"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(dels)
	if len(dels) != 2 || dels[1].Resource != "source:"+id || dels[1].RoutingKey != rk ||
		!strings.Contains(dels[1].Detail, "name=hooks") || dels[0].Resource != "source:src-gh" {
		t.Fatalf("delete audit rows = %s, want one per deleted source", b)
	}
	if n, _ := e.st.ListAccessLog(ctx, store.AccessLogFilter{Action: "DELETE " + apitypes.AdminPrefix + "/generic-sources/{id}"}); len(n) != 0 {
		t.Fatalf("delete audited twice: %+v", n)
	}
	// The name is free again.
	if code, m, _ := e.do("POST", apitypes.AdminPrefix+"/generic-sources", e.owner, `{"orgId":"acme","name":"hooks"}`); code != 201 {
		t.Fatalf("re-create after delete: %d %v", code, m)
	}
}
