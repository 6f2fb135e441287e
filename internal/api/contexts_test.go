package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs/status"
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
	if code != 200 || len(cs) != 2 || cs[0].(map[string]any)["name"] != "pr-envs" || cs[0].(map[string]any)["globPattern"] != "pr-*" {
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
		m["bindings"].([]any)[0].(map[string]any)["hostPattern"] != "**" {
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
	if err != nil || c.Type != apitypes.ContextTypeFixed || len(c.RequiredReviewers) != 1 {
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
	_, scoped := e.createToken(auth.RoleOwner, "generic:acme:x")
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
		if parts[0] == "GET" {
			// Reads are context.read: an auditor sees contexts.
			if code != http.StatusOK {
				t.Errorf("%s as auditor: %d %v, want 200", r, code, m)
			}
		} else if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(m["error"]), parts[2]) {
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
	keys := fmt.Sprint(cs[0].(map[string]any)["secretKeys"])
	if keys != "[gh_token npm_token]" || cs[0].(map[string]any)["name"] != "release" {
		t.Fatalf("secretKeys %s (want the exact scope's keys only): %v", keys, cs[0])
	}
	if strings.Contains(fmt.Sprint(m), "s3cret") {
		t.Fatal("a secret value leaked into the listing")
	}
	code, m, _ = e.do("GET", ctxBase+"?orgId=acme", e.owner, "")
	if _, has := m["contexts"].([]any)[0].(map[string]any)["secretKeys"]; code != 200 || has {
		t.Fatalf("secretKeys without includeSecrets: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", ctxBase+"?orgId=acme&includeSecrets=yes", e.owner, ""); code != 400 {
		t.Fatalf("bad includeSecrets: %d", code)
	}
}

func TestContextTriggerRepoAndUntrustedFields(t *testing.T) {
	e := newSecEnv(t)
	code, m, _ := e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release","triggerTypeFilters":["push","manual"],"repoPatterns":["acme/*","!acme/legacy"],"allowUntrusted":true}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, m)
	}
	c, err := e.st.GetContext(context.Background(), "acme", "release")
	if err != nil || fmt.Sprint(c.TriggerTypeFilters) != "[push manual]" || fmt.Sprint(c.RepoPatterns) != "[acme/* !acme/legacy]" || !c.AllowUntrusted {
		t.Fatalf("stored: %+v %v", c, err)
	}
	_, m, _ = e.do("GET", ctxBase+"/release?orgId=acme", e.owner, "")
	row := m["context"].(map[string]any)
	if fmt.Sprint(row["triggerTypeFilters"]) != "[push manual]" || fmt.Sprint(row["repoPatterns"]) != "[acme/* !acme/legacy]" || row["allowUntrusted"] != true {
		t.Fatalf("show: %v", row)
	}
	for _, b := range []string{
		`{"orgId":"acme","name":"x","triggerTypeFilters":["pr"]}`,
		`{"orgId":"acme","name":"x","triggerTypeFilters":["nightly"]}`,
		`{"orgId":"acme","name":"x","triggerTypeFilters":[""]}`,
		`{"orgId":"acme","name":"x","triggerTypeFilters":"push"}`,
		`{"orgId":"acme","name":"x","repoPatterns":["acme/[z-a]"]}`,
		`{"orgId":"acme","name":"x","repoPatterns":[""]}`,
		`{"orgId":"acme","name":"x","allowUntrusted":"yes"}`,
	} {
		if code, m, _ := e.do("POST", ctxBase, e.owner, b); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", b, code, m)
		}
	}
	// PATCH: null clears, a value replaces, the rest stays.
	p := ctxBase + "/release/policy"
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","triggerTypeFilters":null,"allowUntrusted":null}`); code != 200 {
		t.Fatalf("clear: %d %v", code, m)
	}
	c, _ = e.st.GetContext(context.Background(), "acme", "release")
	if c.TriggerTypeFilters == nil || len(c.TriggerTypeFilters) != 0 || c.AllowUntrusted || len(c.RepoPatterns) != 2 {
		t.Fatalf("after clear: %+v", c)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","repoPatterns":["acme/api"],"triggerTypeFilters":["pull_request"]}`); code != 200 {
		t.Fatalf("replace: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","repoPatterns":["[z-a]"]}`); code != 400 {
		t.Fatalf("bad glob patch: %d %v", code, m)
	}
	c, _ = e.st.GetContext(context.Background(), "acme", "release")
	if fmt.Sprint(c.RepoPatterns) != "[acme/api]" || fmt.Sprint(c.TriggerTypeFilters) != "[pull_request]" {
		t.Fatalf("after replace: %+v", c)
	}
	// Templates take the new fields too.
	code, m, _ = e.do("POST", ctxBase+"/templates", e.owner, `{"orgId":"acme","templateName":"staging","repoPatterns":["acme/*"],"triggerTypeFilters":["schedule"],"allowUntrusted":true}`)
	if code != http.StatusCreated {
		t.Fatalf("template: %d %v", code, m)
	}
	if c, _ = e.st.GetContext(context.Background(), "acme", "staging"); fmt.Sprint(c.RepoPatterns) != "[acme/*]" || !c.AllowUntrusted || fmt.Sprint(c.TriggerTypeFilters) != "[schedule]" {
		t.Fatalf("template stored: %+v", c)
	}
}

func TestContextConcurrencyLimitField(t *testing.T) {
	e := newSecEnv(t)
	limit := func(name string) *int64 {
		t.Helper()
		c, err := e.st.GetContext(context.Background(), "acme", name)
		if err != nil {
			t.Fatal(err)
		}
		return c.ConcurrencyLimit
	}
	if code, m, _ := e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release","concurrencyLimit":2}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, m)
	}
	if l := limit("release"); l == nil || *l != 2 {
		t.Fatalf("stored limit: %v", l)
	}
	_, m, _ := e.do("GET", ctxBase+"/release?orgId=acme", e.owner, "")
	if row := m["context"].(map[string]any); row["concurrencyLimit"] != float64(2) {
		t.Fatalf("show: %v", row)
	}
	if code, m, _ := e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"open"}`); code != http.StatusCreated {
		t.Fatalf("create without limit: %d %v", code, m)
	}
	_, m, _ = e.do("GET", ctxBase+"?orgId=acme", e.owner, "")
	rows := m["contexts"].([]any)
	if len(rows) != 2 {
		t.Fatalf("list: %v", m)
	}
	if v, has := rows[0].(map[string]any)["concurrencyLimit"]; rows[0].(map[string]any)["name"] != "open" || !has || v != nil {
		t.Fatalf("listed unlimited context: %v", rows[0])
	}
	for _, b := range []string{
		`{"orgId":"acme","name":"x","concurrencyLimit":0}`,
		`{"orgId":"acme","name":"x","concurrencyLimit":-1}`,
		`{"orgId":"acme","name":"x","concurrencyLimit":10001}`,
		`{"orgId":"acme","name":"x","concurrencyLimit":1.5}`,
		`{"orgId":"acme","name":"x","concurrencyLimit":"3"}`,
	} {
		code, m, _ := e.do("POST", ctxBase, e.owner, b)
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m), "concurrencyLimit") {
			t.Errorf("%s: %d %v, want 400 naming concurrencyLimit", b, code, m)
		}
	}
	// PATCH: a value replaces, other fields leave it alone, null clears.
	p := ctxBase + "/release/policy"
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","concurrencyLimit":10000}`); code != 200 {
		t.Fatalf("patch: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","allowUntrusted":true}`); code != 200 {
		t.Fatalf("patch other field: %d %v", code, m)
	}
	if l := limit("release"); l == nil || *l != 10000 {
		t.Fatalf("limit after patches: %v", l)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","concurrencyLimit":0}`); code != 400 {
		t.Fatalf("bad patch: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","concurrencyLimit":null}`); code != 200 {
		t.Fatalf("clear: %d %v", code, m)
	}
	if l := limit("release"); l != nil {
		t.Fatalf("cleared limit: %d", *l)
	}
	// Templates take it too.
	if code, m, _ := e.do("POST", ctxBase+"/templates", e.owner, `{"orgId":"acme","templateName":"staging","concurrencyLimit":1}`); code != http.StatusCreated {
		t.Fatalf("template: %d %v", code, m)
	}
	if l := limit("staging"); l == nil || *l != 1 {
		t.Fatalf("template limit: %v", l)
	}
}

// TestContextConcurrencyStrategyFields covers concurrencyStrategy and
// concurrencyTimeoutMs on create, PATCH and templates: stored and shown as
// concurrencyStrategy / concurrency_timeout_ms, validated with a 400 naming
// the field, null clearing to queue and the default timeout.
func TestContextConcurrencyStrategyFields(t *testing.T) {
	e := newSecEnv(t)
	get := func(name string) *store.Context {
		t.Helper()
		c, err := e.st.GetContext(context.Background(), "acme", name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if code, m, _ := e.do("POST", ctxBase, e.owner,
		`{"orgId":"acme","name":"release","concurrencyLimit":1,"concurrencyStrategy":"cancel-pending","concurrencyTimeoutMs":60000}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, m)
	}
	if c := get("release"); c.ConcurrencyStrategy != store.ConcurrencyCancelPending || c.ConcurrencyTimeoutMs == nil || *c.ConcurrencyTimeoutMs != 60000 {
		t.Fatalf("stored: strategy=%q timeout=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}
	_, m, _ := e.do("GET", ctxBase+"/release?orgId=acme", e.owner, "")
	if row := m["context"].(map[string]any); row["concurrencyStrategy"] != "cancel-pending" || row["concurrencyTimeoutMs"] != float64(60000) {
		t.Fatalf("show: %v", row)
	}
	if code, m, _ := e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"open"}`); code != http.StatusCreated {
		t.Fatalf("create without strategy: %d %v", code, m)
	}
	_, m, _ = e.do("GET", ctxBase+"?orgId=acme", e.owner, "")
	rows := m["contexts"].([]any)
	if len(rows) != 2 {
		t.Fatalf("list: %v", m)
	}
	open := rows[0].(map[string]any)
	if v, has := open["concurrencyTimeoutMs"]; open["name"] != "open" || open["concurrencyStrategy"] != "queue" || !has || v != nil {
		t.Fatalf("listed default context: %v", open)
	}
	for _, tc := range []struct{ field, body string }{
		{"concurrencyStrategy", `{"orgId":"acme","name":"x","concurrencyStrategy":"cancel"}`},
		{"concurrencyStrategy", `{"orgId":"acme","name":"x","concurrencyStrategy":""}`},
		{"concurrencyStrategy", `{"orgId":"acme","name":"x","concurrencyStrategy":1}`},
		{"concurrencyTimeoutMs", `{"orgId":"acme","name":"x","concurrencyTimeoutMs":999}`},
		{"concurrencyTimeoutMs", `{"orgId":"acme","name":"x","concurrencyTimeoutMs":0}`},
		{"concurrencyTimeoutMs", `{"orgId":"acme","name":"x","concurrencyTimeoutMs":86400001}`},
		{"concurrencyTimeoutMs", `{"orgId":"acme","name":"x","concurrencyTimeoutMs":1500.5}`},
		{"concurrencyTimeoutMs", `{"orgId":"acme","name":"x","concurrencyTimeoutMs":"30m"}`},
	} {
		code, m, _ := e.do("POST", ctxBase, e.owner, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m), tc.field) {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.body, code, m, tc.field)
		}
	}
	if _, err := e.st.GetContext(context.Background(), "acme", "x"); err == nil {
		t.Fatal("an invalid create stored a context")
	}

	// PATCH: values replace (bounds inclusive), other fields leave them
	// alone, null clears to queue and the default timeout.
	p := ctxBase + "/release/policy"
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","concurrencyStrategy":"queue","concurrencyTimeoutMs":86400000}`); code != 200 {
		t.Fatalf("patch: %d %v", code, m)
	}
	if c := get("release"); c.ConcurrencyStrategy != store.ConcurrencyQueue || c.ConcurrencyTimeoutMs == nil || *c.ConcurrencyTimeoutMs != 86400000 {
		t.Fatalf("after patch: strategy=%q timeout=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","concurrencyStrategy":"cancel-pending","concurrencyTimeoutMs":1000}`); code != 200 {
		t.Fatalf("patch: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","allowUntrusted":true}`); code != 200 {
		t.Fatalf("patch other field: %d %v", code, m)
	}
	if c := get("release"); c.ConcurrencyStrategy != store.ConcurrencyCancelPending || c.ConcurrencyTimeoutMs == nil || *c.ConcurrencyTimeoutMs != 1000 {
		t.Fatalf("after unrelated patch: strategy=%q timeout=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}
	for _, b := range []string{`{"orgId":"acme","concurrencyStrategy":"drop"}`, `{"orgId":"acme","concurrencyTimeoutMs":-5}`} {
		if code, m, _ := e.do("PATCH", p, e.owner, b); code != 400 {
			t.Fatalf("bad patch %s: %d %v", b, code, m)
		}
	}
	// Each field alone is a policy field (not "No policy fields to update").
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","concurrencyStrategy":null}`); code != 200 {
		t.Fatalf("clear strategy: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", p, e.owner, `{"orgId":"acme","concurrencyTimeoutMs":null}`); code != 200 {
		t.Fatalf("clear timeout: %d %v", code, m)
	}
	if c := get("release"); c.ConcurrencyStrategy != store.ConcurrencyQueue || c.ConcurrencyTimeoutMs != nil || c.ConcurrencyLimit == nil {
		t.Fatalf("cleared: strategy=%q timeout=%v limit=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs, c.ConcurrencyLimit)
	}
	// Templates take them too.
	if code, m, _ := e.do("POST", ctxBase+"/templates", e.owner,
		`{"orgId":"acme","templateName":"staging","concurrencyStrategy":"cancel-pending","concurrencyTimeoutMs":300000}`); code != http.StatusCreated {
		t.Fatalf("template: %d %v", code, m)
	}
	if c := get("staging"); c.ConcurrencyStrategy != store.ConcurrencyCancelPending || c.ConcurrencyTimeoutMs == nil || *c.ConcurrencyTimeoutMs != 300000 {
		t.Fatalf("template: strategy=%q timeout=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}
	if code, m, _ := e.do("POST", ctxBase+"/templates", e.owner, `{"orgId":"acme","templateName":"staging","concurrencyStrategy":"x"}`); code != 400 ||
		!strings.Contains(fmt.Sprint(m), "concurrencyStrategy") {
		t.Fatalf("bad template: %d %v", code, m)
	}
}

// Every trigger kind the lock file compiler knows can be named in a
// context's triggerTypeFilters (pr under its run name pull_request).
func TestContextTriggerTypesCoverLockfileKinds(t *testing.T) {
	_, err := lockfile.Compile([]lockfile.SourceFile{{Path: ".kici/workflows/ci.yaml", Source: []byte("name: x\non: [nosuchkind]\njobs:\n  a:\n    run: \"true\"\n")}})
	_, list, ok := strings.Cut(fmt.Sprint(err), "supported: ")
	if !ok {
		t.Fatalf("compiler error does not list the kinds: %v", err)
	}
	list, _, _ = strings.Cut(list, ")")
	kinds := strings.Split(list, ", ")
	if len(kinds) < 20 {
		t.Fatalf("parsed kinds %v from %v", kinds, err)
	}
	for _, k := range kinds {
		if k == "pr" {
			k = "pull_request"
		}
		if !slices.Contains(ContextTriggerTypes, k) {
			t.Errorf("trigger kind %q is not an allowed context trigger type", k)
		}
	}
}

func TestContextDeleteBlockedByPendingHolds(t *testing.T) {
	e := newSecEnv(t)
	e.do("POST", ctxBase, e.owner, `{"orgId":"o","name":"release"}`)
	run, jobs := e.addRun("deploy", status.RunRunning, "o/app", time.Now().UTC(), "ship")
	h := e.addHold(run, jobs[0], hold.QueueContext, "needs alice", "alice")
	code, m, _ := e.do("DELETE", ctxBase+"/release?orgId=o", e.owner, "")
	if code != http.StatusConflict || m["errorCode"] != "pending_held_runs" || !strings.Contains(fmt.Sprint(m["error"]), "1 pending held run") ||
		!strings.Contains(fmt.Sprint(m["error"]), "approve or reject them first, or cancel their runs (kici-admin held-run list --org o)") {
		t.Fatalf("delete with a pending hold: %d %v", code, m)
	}
	if _, err := e.st.GetContext(context.Background(), "o", "release"); err != nil {
		t.Fatalf("context deleted despite the 409: %v", err)
	}
	if ok, err := e.st.DecideHeldRun(context.Background(), h.ID, nil, nil, hold.Rejected, "test", "", time.Now()); err != nil || !ok {
		t.Fatalf("resolve hold: %v %v", ok, err)
	}
	if code, m, _ := e.do("DELETE", ctxBase+"/release?orgId=o", e.owner, ""); code != 200 || m["deleted"] != true {
		t.Fatalf("delete after the hold resolved: %d %v", code, m)
	}
}

func TestContextSourceOverrides(t *testing.T) {
	e := newSecEnv(t)
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	base := ctxBase + "/release/source-overrides"
	for path, want := range map[string]int{
		base + "/REGION?orgId=acme&routingKey=generic:acme:1":             200,
		base + "/REGION?orgId=acme&routingKey=generic:acme:2":             200,
		base + "/API_URL?orgId=acme&routingKey=generic:acme:1":            200,
		base + "/REGION?orgId=acme":                                       400,
		base + "/1BAD?orgId=acme&routingKey=generic:acme:1":               400,
		ctxBase + "/nope/source-overrides/REGION?orgId=acme&routingKey=k": 404,
	} {
		if code, m, _ := e.do("PUT", path, e.owner, `{"value":"v-`+path[len(path)-1:]+`"}`); code != want {
			t.Errorf("PUT %s: %d %v, want %d", path, code, m, want)
		}
	}
	if code, m, _ := e.do("PUT", base+"/REGION?orgId=acme&routingKey=k", e.owner, `{}`); code != 400 {
		t.Fatalf("PUT without value: %d %v", code, m)
	}
	code, m, _ := e.do("GET", base+"?orgId=acme", e.auditor, "")
	ov, _ := m["overrides"].([]any)
	if code != 200 || len(ov) != 3 || ov[0].(map[string]any)["routingKey"] != "generic:acme:1" || ov[0].(map[string]any)["key"] != "API_URL" {
		t.Fatalf("list: %d %v", code, m)
	}
	if _, m, _ := e.do("GET", base+"?orgId=acme&routingKey=generic:acme:2", e.owner, ""); len(m["overrides"].([]any)) != 1 {
		t.Fatalf("list by routing key: %v", m)
	}
	if code, _, _ := e.do("PUT", base+"/REGION?orgId=acme&routingKey=k", e.auditor, `{"value":"x"}`); code != 403 {
		t.Fatalf("auditor put: %d", code)
	}
	if code, m, _ := e.do("DELETE", base+"/REGION?orgId=acme&routingKey=generic:acme:2", e.owner, ""); code != 200 || m["deleted"] != true {
		t.Fatalf("delete: %d %v", code, m)
	}
	if code, _, _ := e.do("DELETE", base+"/REGION?orgId=acme&routingKey=generic:acme:2", e.owner, ""); code != 404 {
		t.Fatalf("delete again: %d", code)
	}
	// Overrides go with their context.
	e.do("DELETE", ctxBase+"/release?orgId=acme", e.owner, "")
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	if _, m, _ := e.do("GET", base+"?orgId=acme", e.owner, ""); len(m["overrides"].([]any)) != 0 {
		t.Fatalf("overrides survived their context: %v", m)
	}
}

// Invalid repo patterns, glob patterns, reviewers and trigger filters are
// refused with a message naming the problem, and change nothing.
func TestContextPolicyFieldValidation(t *testing.T) {
	e := newSecEnv(t)
	if code, m, _ := e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release","requiredReviewers":["alice"],"repoPatterns":["acme/*"]}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, m)
	}
	for field, cases := range map[string]map[string]string{
		"repoPatterns": {
			`["[abc"]`:         "names no repository",
			`["acme/[abc"]`:    `unclosed "["`,
			`["acme/app]"]`:    `unmatched "]"`,
			`["acme/{a,b"]`:    `unclosed "{"`,
			`["!"]`:            "not a pattern",
			`["!!"]`:           "not a pattern",
			`["noslash"]`:      "names no repository",
			`["*"]`:            "can never match",
			`["acme/!(x)"]`:    "not supported",
			`["acme/a","!"]`:   "not a pattern",
			`["acme/x",""]`:    "entries must be 1..",
			`"acme/*"`:         "must be an array of strings",
			`["acme/a\\[b"]`:   "",
			`["**"]`:           "",
			`["*/*","!a/b"]`:   "",
			`["acme/{a,b}-*"]`: "",
		},
		"requiredReviewers": {
			`["a b"]`:                              "whitespace or control",
			`["a\tb"]`:                             "whitespace or control",
			`["a\u0007"]`:                          "whitespace or control",
			`["alice","alice"]`:                    `"alice" is listed twice`,
			`["` + strings.Repeat("r", 129) + `"]`: "1..128",
			`["service:tok-1","bob"]`:              "",
		},
		"triggerTypeFilters": {
			`["push","tag","push"]`: `"push" is listed twice`,
			`["push","tag"]`:        "",
		},
	} {
		for value, want := range cases {
			body := fmt.Sprintf(`{"orgId":"acme",%q:%s}`, field, value)
			code, m, _ := e.do("PATCH", ctxBase+"/release/policy", e.owner, body)
			if want == "" {
				if code != 200 {
					t.Errorf("%s: %d %v, want 200", body, code, m)
				}
				continue
			}
			if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error"]), want) || !strings.Contains(fmt.Sprint(m["error"]), field) {
				t.Errorf("%s: %d %v, want 400 naming %s and %q", body, code, m, field, want)
			}
			// The same value is refused on create, which stores nothing.
			body = fmt.Sprintf(`{"orgId":"acme","name":"fresh",%q:%s}`, field, value)
			if code, m, _ := e.do("POST", ctxBase, e.owner, body); code != http.StatusBadRequest {
				t.Errorf("create %s: %d %v, want 400", body, code, m)
			}
		}
	}
	if _, err := e.st.GetContext(context.Background(), "acme", "fresh"); err == nil {
		t.Fatal("a refused create stored a context")
	}

	// The glob pattern of a glob context must compile with paired brackets.
	for i, c := range []struct {
		pat  string
		want int
	}{{"[", 400}, {"pr-[0-9", 400}, {"pr-{a,b", 400}, {"pr-]", 400}, {"pr-!(x)", 400},
		{"pr-[0-9]*", 201}, {"deploy-*", 201}, {"*", 201}} {
		code, m, _ := e.do("POST", ctxBase, e.owner, fmt.Sprintf(`{"orgId":"acme","name":"g%d","type":"glob","globPattern":%q}`, i, c.pat))
		if code != c.want || (c.want == 400 && !strings.Contains(fmt.Sprint(m["error"]), "globPattern")) {
			t.Errorf("globPattern %q: %d %v, want %d", c.pat, code, m, c.want)
		}
	}
}

// Binding patterns: a scope pattern is a scope path with glob syntax and
// agent placeholders, a host pattern **, a glob or a compiling /regex/.
func TestContextBindPatternValidation(t *testing.T) {
	e := newSecEnv(t)
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	bind := ctxBase + "/release/bind"
	for _, c := range []struct {
		scope, host string
		code        int
		want        string
	}{
		{"../x", "", 400, `".." segment`},
		{"a/./b", "", 400, `"." segment`},
		{"/release", "", 400, "empty segment"},
		{"release/", "", 400, "empty segment"},
		{"a//b", "", 400, "empty segment"},
		{"rel ease", "", 400, "segments hold only"},
		{"rel$ease", "", 400, "segments hold only"},
		{"release/[x", "", 400, `unclosed "["`},
		{"release/{a,b", "", 400, `unclosed "{"`},
		{"team/${user}", "", 400, "unknown placeholder"},
		{"pg:", "", 400, "empty segment"},
		{strings.Repeat("a", 256), "", 400, "at most 255"},
		{"release", "/[/", 400, "not a valid regular expression"},
		{"release", "/ci/g", 400, "only regular-expression flag is i"},
		{"release", "/abc", 400, "/source/"},
		{"release", "//", 400, "empty regular expression"},
		{"release", "ci [x", 400, "whitespace"},
		{"release", "ci-[x", 400, `unclosed "["`},
		{"release/*", "", 201, ""},
		{"pg:team/prod", "**", 201, ""},
		{"team/${label:team}/*", "*", 201, ""},
		{"agents/${agentId}", "/^ci-\\d+$/i", 201, ""},
		{"hosts/${host}/{a,b}", "build-*", 201, ""},
		{"x/[a-c]?", "runner-1", 201, ""},
	} {
		body, _ := json.Marshal(map[string]string{"orgId": "acme", "scopePattern": c.scope, "hostPattern": c.host})
		code, m, _ := e.do("POST", bind, e.owner, string(body))
		if code != c.code || !strings.Contains(fmt.Sprint(m["error"]), c.want) {
			t.Errorf("bind %q host %q: %d %v, want %d %q", c.scope, c.host, code, m, c.code, c.want)
		}
		if c.code == 400 {
			field := "scopePattern"
			if c.host != "" {
				field = "hostPattern"
			}
			if !strings.HasPrefix(fmt.Sprint(m["error"]), field) {
				t.Errorf("bind %q host %q: %v does not name %s", c.scope, c.host, m["error"], field)
			}
		}
	}
	bs, _ := e.st.ListContextBindings(context.Background(), "acme", "release")
	if len(bs) != 6 {
		t.Fatalf("bindings stored: %d, want the 6 valid ones", len(bs))
	}
}

// A too-long variable or override value is reported as too long, not as
// missing.
func TestContextValueTooLong(t *testing.T) {
	e := newSecEnv(t)
	e.do("POST", ctxBase, e.owner, `{"orgId":"acme","name":"release"}`)
	long := fmt.Sprintf(`{"value":%q}`, strings.Repeat("v", 64<<10+1))
	for _, path := range []string{ctxBase + "/release/variables/REGION?orgId=acme", ctxBase + "/release/source-overrides/REGION?orgId=acme&routingKey=k"} {
		code, m, _ := e.do("PUT", path, e.owner, long)
		if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "too long") || strings.Contains(fmt.Sprint(m["error"]), "required") {
			t.Errorf("PUT %s with 64 KiB + 1: %d %v", path, code, m)
		}
		if code, m, _ := e.do("PUT", path, e.owner, `{}`); code != 400 || m["error"] != "value is required" {
			t.Errorf("PUT %s without value: %d %v", path, code, m)
		}
		if code, m, _ := e.do("PUT", path, e.owner, fmt.Sprintf(`{"value":%q}`, strings.Repeat("v", 64<<10))); code != 200 {
			t.Errorf("PUT %s with 64 KiB: %d %v", path, code, m)
		}
	}
}

// A body of the wrong JSON type is described in the client's terms, not
// with Go type names.
func TestDecodeBodyTypeErrorsNameFields(t *testing.T) {
	e := newSecEnv(t)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", ctxBase, `[]`, "Invalid JSON body: request body must be a JSON object"},
		{"POST", ctxBase, `"acme"`, "Invalid JSON body: request body must be a JSON object"},
		{"POST", ctxBase, `{"orgId":1,"name":"x"}`, "Invalid JSON body: field orgId must be a string"},
		{"POST", ctxBase + "/templates", `{"orgId":"acme","templateName":"t","variables":{"A":1}}`, "Invalid JSON body: field variables must be a JSON object of strings"},
		{"POST", ctxBase + "/templates", `{"orgId":"acme","templateName":"t","variables":[]}`, "Invalid JSON body: field variables must be a JSON object of strings"},
		{"PATCH", "/api/v1/admin/trust-policy", `{"customerId":"acme","approvalExpiryHours":"72"}`, "Invalid JSON body: field approvalExpiryHours must be an integer"},
		{"PATCH", "/api/v1/admin/trust-policy", `[1]`, "Invalid JSON body: request body must be a JSON object"},
		{"PUT", ctxBase + "/x/variables/A?orgId=acme", `{"value":true}`, "Invalid JSON body: field value must be a string"},
	} {
		code, m, _ := e.do(c.method, c.path, e.owner, c.body)
		msg := fmt.Sprint(m["error"])
		if code != 400 || msg != c.want {
			t.Errorf("%s %s %s: %d %q, want 400 %q", c.method, c.path, c.body, code, msg, c.want)
		}
		if strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") || strings.Contains(msg, "json:") {
			t.Errorf("%s: message leaks Go types: %q", c.body, msg)
		}
	}
}
