package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"kici.dev/kici/internal/store"
)

const ctxBase = "/api/v1/admin/contexts"

func TestContextCreateUpsertAndValidation(t *testing.T) {
	e := newSecEnv(t)
	code, m, _ := e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release","branchRestrictions":["main"],"requiredReviewers":["alice"],"waitTimerSeconds":0,"holdExpirySeconds":60,"minimumTrust":"trusted"}`)
	if code != http.StatusCreated || m["created"] != true || m["envId"] == "" {
		t.Fatalf("create: %d %v", code, m)
	}
	id := m["envId"]
	code, m, _ = e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release","enabled":false}`)
	if code != http.StatusOK || m["created"] != false || m["envId"] != id {
		t.Fatalf("upsert: %d %v (want 200, same id %v)", code, m, id)
	}
	c, err := e.st.GetContext(context.Background(), "acme", "release")
	if err != nil || c.Enabled || c.RequiredReviewers != nil {
		t.Fatalf("after upsert: %+v %v", c, err)
	}

	bad := []string{
		`{"name":"x"}`,
		`{"orgId":"acme"}`,
		`{"orgId":"acme","name":"../x"}`,
		`{"orgId":"acme","name":"templates"}`,
		`{"orgId":"acme","name":"x","type":"template"}`,
		`{"orgId":"acme","name":"x","type":"glob"}`,
		`{"orgId":"acme","name":"x","globPattern":"x*"}`,
		`{"orgId":"acme","name":"x","waitTimerSeconds":-1}`,
		`{"orgId":"acme","name":"x","holdExpirySeconds":0}`,
		`{"orgId":"acme","name":"x","minimumTrust":"known"}`,
		`{"orgId":"acme","name":"x","branchRestrictions":"main"}`,
		`{"orgId":"acme","name":"x","unknown":1}`,
	}
	for _, b := range bad {
		if code, m, _ := e.do("POST", ctxBase, e.owner, b); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", b, code, m)
		}
	}
	list, _ := e.st.ListContexts(context.Background(), "acme")
	if len(list) != 1 {
		t.Fatalf("bad input created contexts: %v", list)
	}

	code, m, _ = e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"pr-envs","type":"glob","globPattern":"pr-*"}`)
	if code != http.StatusCreated {
		t.Fatalf("glob create: %d %v", code, m)
	}
	code, m, _ = e.do("GET", ctxBase+"?orgId=acme", e.owner, "")
	cs, _ := m["contexts"].([]any)
	if code != 200 || len(cs) != 2 || cs[0].(map[string]any)["name"] != "pr-envs" || cs[0].(map[string]any)["glob_pattern"] != "pr-*" {
		t.Fatalf("list: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", ctxBase, e.owner, ""); code != http.StatusBadRequest {
		t.Fatalf("list without orgId: %d", code)
	}
	if code, m, _ := e.do("GET", ctxBase+"?orgId=other", e.owner, ""); code != 200 || len(m["contexts"].([]any)) != 0 {
		t.Fatalf("other org: %d %v", code, m)
	}
}

func TestContextPolicyPatchNullClears(t *testing.T) {
	e := newSecEnv(t)
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release","branchRestrictions":["main"],"requiredReviewers":["alice"],"waitTimerSeconds":30,"holdExpirySeconds":60,"minimumTrust":"trusted"}`)
	p := ctxBase + "/release/policy"
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme"}`); code != http.StatusBadRequest {
		t.Fatalf("no fields: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", ctxBase+"/nope/policy", e.owner, `{"orgId":"acme","enabled":false}`); code != http.StatusNotFound {
		t.Fatalf("unknown: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","contextName":"other","enabled":false}`); code != http.StatusBadRequest {
		t.Fatalf("mismatched contextName: %d %v", code, m)
	}
	// Only present fields change.
	code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","contextName":"release","requiredReviewers":["bob"],"allowLocalExecution":true}`)
	if code != 200 || m["updated"] != true {
		t.Fatalf("patch: %d %v", code, m)
	}
	c, _ := e.st.GetContext(context.Background(), "acme", "release")
	if len(c.RequiredReviewers) != 1 || c.RequiredReviewers[0] != "bob" || !c.AllowLocalExecution || c.WaitTimerSeconds == nil || *c.WaitTimerSeconds != 30 ||
		len(c.BranchRestrictions) != 1 || c.MinimumTrust == nil {
		t.Fatalf("after patch: %+v", c)
	}
	// Explicit nulls clear.
	code, m, _ = e.do("PATCH", p, e.owner, `{"orgId":"acme","requiredReviewers":null,"waitTimerSeconds":null,"holdExpirySeconds":null,"minimumTrust":null,"branchRestrictions":null}`)
	if code != 200 {
		t.Fatalf("null patch: %d %v", code, m)
	}
	c, _ = e.st.GetContext(context.Background(), "acme", "release")
	if c.RequiredReviewers != nil || c.WaitTimerSeconds != nil || c.HoldExpirySeconds != nil || c.MinimumTrust != nil || len(c.BranchRestrictions) != 0 || !c.AllowLocalExecution {
		t.Fatalf("after null patch: %+v", c)
	}
	// Bad values change nothing.
	if code, _, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","requiredReviewers":["x"],"waitTimerSeconds":"soon"}`); code != http.StatusBadRequest {
		t.Fatalf("bad value: %d", code)
	}
	c, _ = e.st.GetContext(context.Background(), "acme", "release")
	if c.RequiredReviewers != nil {
		t.Fatalf("rejected patch changed reviewers: %+v", c)
	}
}

func TestContextBindShowVariablesAndCascadeDelete(t *testing.T) {
	e := newSecEnv(t)
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	bind := ctxBase + "/release/bind"
	if code, m, _ := e.do("POST", bind, e.owner, `{"orgId":"acme","scopePattern":"release/*"}`); code != http.StatusCreated || m["created"] != true {
		t.Fatalf("bind: %d %v", code, m)
	}
	if code, m, _ := e.do("POST", bind, e.owner, `{"orgId":"acme","scopePattern":"release/*","hostPattern":"**"}`); code != http.StatusOK || m["created"] != false {
		t.Fatalf("identical bind: %d %v", code, m)
	}
	if code, _, _ := e.do("POST", ctxBase+"/nope/bind", e.owner, `{"orgId":"acme","scopePattern":"x"}`); code != http.StatusNotFound {
		t.Fatalf("bind unknown: %d", code)
	}
	if code, _, _ := e.do("POST", bind, e.owner, `{"orgId":"acme"}`); code != http.StatusBadRequest {
		t.Fatalf("bind without scope: %d", code)
	}

	v := ctxBase + "/release/variables"
	if code, m, _ := e.do("PUT", v+"/REGION?orgId=acme", e.owner, `{"value":"eu","locked":true}`); code != 200 || m["set"] != true {
		t.Fatalf("put: %d %v", code, m)
	}
	for _, tc := range []struct{ path, body string }{
		{v + "/REGION", `{"value":"eu"}`},
		{v + "/bad-key?orgId=acme", `{"value":"eu"}`},
		{v + "/REGION?orgId=acme", `{}`},
	} {
		if code, m, _ := e.do("PUT", tc.path, e.owner, tc.body); code != http.StatusBadRequest {
			t.Errorf("PUT %s %s: %d %v, want 400", tc.path, tc.body, code, m)
		}
	}
	if code, _, _ := e.do("PUT", ctxBase+"/nope/variables/A?orgId=acme", e.owner, `{"value":"1"}`); code != http.StatusNotFound {
		t.Fatalf("put on unknown context: %d", code)
	}
	code, m, _ := e.do("GET", v+"?orgId=acme", e.owner, "")
	vs, _ := m["variables"].([]any)
	if code != 200 || len(vs) != 1 || vs[0].(map[string]any)["value"] != "eu" || vs[0].(map[string]any)["locked"] != true {
		t.Fatalf("list vars: %d %v", code, m)
	}

	code, m, _ = e.do("GET", ctxBase+"/release?orgId=acme", e.owner, "")
	if code != 200 || m["context"].(map[string]any)["name"] != "release" || len(m["variables"].([]any)) != 1 || len(m["bindings"].([]any)) != 1 ||
		m["bindings"].([]any)[0].(map[string]any)["host_pattern"] != "**" {
		t.Fatalf("show: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", ctxBase+"/nope?orgId=acme", e.owner, ""); code != http.StatusNotFound {
		t.Fatalf("show unknown: %d", code)
	}
	if code, _, _ := e.do("GET", ctxBase+"/release", e.owner, ""); code != http.StatusBadRequest {
		t.Fatalf("show without orgId: %d", code)
	}

	if code, m, _ := e.do("DELETE", v+"/REGION?orgId=acme", e.owner, ""); code != 200 || m["deleted"] != true {
		t.Fatalf("delete var: %d %v", code, m)
	}
	if code, _, _ := e.do("DELETE", v+"/REGION?orgId=acme", e.owner, ""); code != http.StatusNotFound {
		t.Fatalf("delete var twice: %d", code)
	}
	e.do("PUT", v+"/A?orgId=acme", e.owner, `{"value":"1"}`)

	if code, m, _ := e.do("DELETE", ctxBase+"/release?orgId=acme", e.owner, ""); code != 200 || m["deleted"] != true {
		t.Fatalf("delete: %d %v", code, m)
	}
	if code, _, _ := e.do("DELETE", ctxBase+"/release?orgId=acme", e.owner, ""); code != http.StatusNotFound {
		t.Fatalf("delete twice: %d", code)
	}
	// Re-created under the same name, nothing of the old one survives.
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	code, m, _ = e.do("GET", ctxBase+"/release?orgId=acme", e.owner, "")
	if code != 200 || len(m["variables"].([]any)) != 0 || len(m["bindings"].([]any)) != 0 {
		t.Fatalf("cascade: %d %v", code, m)
	}

	// Writes are in the access log.
	entries, err := e.st.ListAccessLog(context.Background(), store.AccessLogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, en := range entries {
		if en.Action == "DELETE /api/v1/admin/contexts/{name}" {
			found = true
		}
	}
	if !found {
		t.Fatalf("context delete not in the access log: %d entries", len(entries))
	}
}

func TestContextTemplates(t *testing.T) {
	e := newSecEnv(t)
	p := ctxBase + "/templates"
	code, m, _ := e.do("POST", p, e.owner, `{"orgId":"acme","templateName":"staging","type":"template","requiredReviewers":["alice"],"variables":{"A":"1","B":"2"}}`)
	if code != http.StatusCreated || m["created"] != true || m["variablesSet"] != float64(2) {
		t.Fatalf("template: %d %v", code, m)
	}
	c, err := e.st.GetContext(context.Background(), "acme", "staging")
	if err != nil || c.Type != "fixed" || len(c.RequiredReviewers) != 1 {
		t.Fatalf("stored template: %+v %v", c, err)
	}
	e.do("PUT", ctxBase+"/staging/variables/A?orgId=acme", e.owner, `{"value":"x","locked":true}`)
	code, m, _ = e.do("POST", p, e.owner, `{"orgId":"acme","templateName":"staging","variables":{"A":"3"}}`)
	if code != http.StatusOK || m["created"] != false || m["variablesSet"] != float64(1) {
		t.Fatalf("template update: %d %v", code, m)
	}
	vs, _ := e.st.ListContextVariables(context.Background(), "acme", "staging")
	if len(vs) != 2 || vs[0].Value != "3" || vs[0].Locked || vs[1].Value != "2" {
		t.Fatalf("variables: %+v", vs)
	}
	for _, b := range []string{`{"orgId":"acme"}`, `{"orgId":"acme","templateName":"t","variables":{"bad-key":"x"}}`, `{"orgId":"acme","templateName":"t","type":"glob"}`} {
		if code, m, _ := e.do("POST", p, e.owner, b); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v", b, code, m)
		}
	}
}

func TestContextRoutesRefuseAuditorWritesAndScopedTokens(t *testing.T) {
	e := newSecEnv(t)
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	_, scoped := e.createToken("owner", "generic:acme:x")
	for _, r := range Routes {
		parts := strings.Fields(r)
		if !strings.HasPrefix(parts[1], ctxBase) {
			continue
		}
		path := strings.NewReplacer("{name}", "release", "{key}", "A").Replace(parts[1]) + "?orgId=acme"
		body := ""
		if parts[0] == "POST" || parts[0] == "PUT" || parts[0] == "PATCH" {
			body = "{}"
		}
		code, m, _ := e.do(parts[0], path, e.auditor, body)
		if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(m["error"]), parts[2]) {
			t.Errorf("%s as auditor: %d %v", r, code, m)
		}
		code, m, _ = e.do(parts[0], path, scoped, body)
		if code != http.StatusForbidden || m["error"] != msgUnscopedRequired {
			t.Errorf("%s with a scoped token: %d %v", r, code, m)
		}
	}
	if c, err := e.st.GetContext(context.Background(), "acme", "release"); err != nil || c == nil {
		t.Fatalf("refused calls changed the context: %v", err)
	}
}

func TestContextListIncludeSecretsNamesKeysOfExactScopes(t *testing.T) {
	e := newSecEnv(t)
	ctx := context.Background()
	for _, k := range []string{"npm_token", "gh_token"} {
		if err := e.svc.Put(ctx, "acme", "release", k, "s3cret-"+k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.svc.Put(ctx, "acme", "release/eu", "other", "s3cret-other", nil); err != nil {
		t.Fatal(err)
	}
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	e.do("POST", ctxBase+"/release/bind", e.owner, `{"orgId":"acme","scopePattern":"release"}`)
	e.do("POST", ctxBase+"/release/bind", e.owner, `{"orgId":"acme","scopePattern":"release/*"}`)
	code, m, _ := e.do("GET", ctxBase+"?orgId=acme&includeSecrets=true", e.owner, "")
	cs, _ := m["contexts"].([]any)
	if code != 200 || len(cs) != 1 {
		t.Fatalf("list: %d %v", code, m)
	}
	keys := fmt.Sprint(cs[0].(map[string]any)["secret_keys"])
	if keys != "[gh_token npm_token]" || cs[0].(map[string]any)["name"] != "release" {
		t.Fatalf("secret_keys %s (want the exact scope's keys only): %v", keys, cs[0])
	}
	if strings.Contains(fmt.Sprint(m), "s3cret") {
		t.Fatal("a secret value leaked into the listing")
	}
	code, m, _ = e.do("GET", ctxBase+"?orgId=acme", e.owner, "")
	if _, has := m["contexts"].([]any)[0].(map[string]any)["secret_keys"]; code != 200 || has {
		t.Fatalf("secret_keys without includeSecrets: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", ctxBase+"?orgId=acme&includeSecrets=yes", e.owner, ""); code != 400 {
		t.Fatalf("bad includeSecrets: %d", code)
	}
}
