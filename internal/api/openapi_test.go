package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4/jwt"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/provenance"
)

// TestOpenAPIDescribesEveryMountedRoute reads the document a real router
// serves at /api/v1/admin/openapi.json (no token: it is public) and checks,
// for every pattern the router mounted, that the document has the
// operation with the permission the router really enforces: without a
// token the route answers 401 exactly when the document names a
// permission, and a token of a role lacking that permission gets a 403
// naming it.
func TestOpenAPIDescribesEveryMountedRoute(t *testing.T) {
	st, a := openTestStore(t, t.TempDir())
	tokens := map[auth.Role]string{}
	for _, role := range []auth.Role{auth.RoleOwner, auth.RoleAdmin, auth.RoleAuditor} {
		tokens[role] = issueToken(t, a, role)
	}
	mux, mounted := newRouter(Deps{Store: st, Auth: a, Version: "test"})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	res, err := http.Get(srv.URL + apitypes.AdminPrefix + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET openapi.json: %d %v", res.StatusCode, err)
	}
	res.Body.Close()
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if len(mounted) < 70 {
		t.Fatalf("router mounted only %d routes", len(mounted))
	}
	call := func(method, path, token string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, fmt.Sprint(body["error"])
	}
	for _, pattern := range mounted {
		method, path, _ := strings.Cut(pattern, " ")
		op := doc.Paths[path][strings.ToLower(method)]
		if op == nil {
			t.Errorf("%s is mounted but not in the OpenAPI document", pattern)
			continue
		}
		if s, _ := op["summary"].(string); s == "" {
			t.Errorf("%s: no summary", pattern)
		}
		perm, _ := op[PermissionExtension].(string)
		concrete := strings.NewReplacer("{", "x", "}", "").Replace(path)
		code, _ := call(method, concrete, "")
		if perm == "" {
			if code == http.StatusUnauthorized {
				t.Errorf("%s: documented as public but answers 401 without a token", pattern)
			}
			continue
		}
		if code != http.StatusUnauthorized {
			t.Errorf("%s: documented as needing %s but answers %d without a token", pattern, perm, code)
		}
		for role, tok := range tokens {
			if auth.HasPermission(role, auth.Permission(perm)) {
				continue
			}
			if code, msg := call(method, concrete, tok); code != http.StatusForbidden || !strings.Contains(msg, fmt.Sprintf("permission %q", perm)) {
				t.Errorf("%s as %s: %d %q, want 403 naming permission %q", pattern, role, code, msg, perm)
			}
		}
	}
	// Routes the table documents but serves through another pattern are
	// listed too, with their permission.
	if op := doc.Paths[apitypes.AdminPrefix+"/secrets/scopes/{orgId}/{scope}"]["delete"]; op == nil || op[PermissionExtension] != string(auth.PermSecretDelete) {
		t.Errorf("DELETE /secrets/scopes/{orgId}/{scope}: %v", op)
	}
}

// TestOpenAPISchemasFollowTheGoTypes checks a reflected schema against the
// JSON a client reads: camelCase properties, nullable pointers, arrays.
func TestOpenAPISchemasFollowTheGoTypes(t *testing.T) {
	raw, err := json.Marshal(OpenAPIDocument("v1"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Components.Schemas["Context"]
	if fmt.Sprint(c.Properties["waitTimerSeconds"]["type"]) != "[integer null]" || c.Properties["branchRestrictions"]["type"] != "array" ||
		c.Properties["createdAt"]["format"] != "date-time" {
		t.Errorf("Context schema: %v", c.Properties)
	}
	var ops struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In string } `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &ops); err != nil {
		t.Fatal(err)
	}
	if ps := fmt.Sprint(ops.Paths[apitypes.AdminPrefix+"/runs/{runId}/jobs"]["get"].Parameters); ps != "[{runId path} {includeSteps query}]" {
		t.Errorf("GET /runs/{runId}/jobs parameters: %s", ps)
	}
	if _, ok := doc.Components.Schemas["ContextDetail"].Properties["variables"]; !ok {
		t.Errorf("ContextDetail schema lacks variables: %v", doc.Components.Schemas["ContextDetail"])
	}
}

// TestSchemaBuilderFollowsEncodingJSON checks the reflection rules that
// keep a schema from rejecting what encoding/json writes: the fields of a
// nil embedded pointer are absent, a type with its own MarshalJSON may
// write anything, a nullable:"true" slice may be null, and a oneOf
// response lists its shapes.
func TestSchemaBuilderFollowsEncodingJSON(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type outer struct {
		*inner
		B []string     `json:"b" nullable:"true"`
		C jwt.Audience `json:"c"`
		D string       `json:"d"`
	}
	sb := &schemaBuilder{schemas: map[string]any{}, named: map[string]reflect.Type{}}
	s := sb.object(reflect.TypeOf(outer{}))
	props := s["properties"].(map[string]any)
	if got := fmt.Sprint(s["required"]); got != "[b c d]" {
		t.Errorf("required = %s, want [b c d] (a belongs to a nil-able embedded pointer)", got)
	}
	if fmt.Sprint(props["b"]) != "map[items:map[type:string] type:[array null]]" || len(props["c"].(map[string]any)) != 0 {
		t.Errorf("b = %v, c = %v", props["b"], props["c"])
	}
	if got := fmt.Sprint(sb.response(oneOf{apitypes.RunList{}, apitypes.RunCount{}})); got != "map[oneOf:[map[$ref:#/components/schemas/RunList] map[$ref:#/components/schemas/RunCount]]]" {
		t.Errorf("oneOf response: %s", got)
	}
	if got := fmt.Sprint(sb.of(reflect.TypeOf(provenance.Failure{}))); got != "map[$ref:#/components/schemas/provenance.Failure]" {
		t.Errorf("another package's type: %s", got)
	}
}
