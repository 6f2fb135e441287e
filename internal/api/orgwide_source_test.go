package api

import (
	"context"
	"net/http"
	"testing"

	"kici.dev/kici/internal/store"
)

// TestSourceOrgWideWorkflowsSetting: an admin denies and allows the org's
// organization-wide workflows for one source; the value is stored in the
// source's settings; a bad value or an unknown source changes nothing.
func TestSourceOrgWideWorkflowsSetting(t *testing.T) {
	e := newEnv(t)
	code, m, _ := e.do("POST", "/api/v1/admin/generic-sources", e.owner, `{"orgId":"acme","name":"svc"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, m)
	}
	id := m["source"].(map[string]any)["id"].(string)
	path := "/api/v1/admin/generic-sources/" + id + "/org-wide-workflows"
	stored := func() string {
		t.Helper()
		set, err := e.st.GetSourceSettings(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return set.OrgWideWorkflows
	}
	if code, m, _ := e.do("PUT", path, e.owner, `{"orgWideWorkflows":"deny"}`); code != http.StatusOK || m["orgWideWorkflows"] != "deny" || stored() != store.OrgWideDeny {
		t.Fatalf("deny: %d %v (stored %q)", code, m, stored())
	}
	if code, m, _ := e.do("PUT", path, e.owner, `{"orgWideWorkflows":"sometimes"}`); code != http.StatusBadRequest || stored() != store.OrgWideDeny {
		t.Fatalf("bad value: %d %v (stored %q)", code, m, stored())
	}
	if code, _, _ := e.do("PUT", "/api/v1/admin/generic-sources/nope/org-wide-workflows", e.owner, `{"orgWideWorkflows":"allow"}`); code != http.StatusNotFound {
		t.Fatalf("unknown source: %d", code)
	}
	if code, m, _ := e.do("PUT", path, e.owner, `{"orgWideWorkflows":"allow"}`); code != http.StatusOK || stored() != store.OrgWideAllow {
		t.Fatalf("allow: %d %v (stored %q)", code, m, stored())
	}
}
