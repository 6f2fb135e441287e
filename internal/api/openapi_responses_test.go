package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// nonJSONRoutes are the routes whose success answer is not a JSON body the
// document describes; every other route names its response shape.
var nonJSONRoutes = map[string]string{
	// Server-sent event streams (text/event-stream).
	"GET /api/v1/admin/runs/{runId}/events":                             "server-sent events",
	"GET /api/v1/admin/runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream": "server-sent events",
	// The artifact's own bytes (application/octet-stream or its type).
	"GET /api/v1/admin/runs/{runId}/artifacts/{name}": "artifact download",
	// The OpenAPI document itself: JSON, but describing it would only
	// repeat the OpenAPI 3.1 schema.
	"GET /api/v1/admin/openapi.json": "the OpenAPI document",
}

// TestOpenAPIEveryJSONRouteHasAResponseSchema: a route answering JSON
// without a response shape in the route table would leave clients and
// code generators guessing, so each route either names one or is listed
// in nonJSONRoutes (and then names none).
func TestOpenAPIEveryJSONRouteHasAResponseSchema(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range routeTable() {
		key := rt.key()
		seen[key] = true
		_, nonJSON := nonJSONRoutes[key]
		switch {
		case rt.response == nil && !nonJSON:
			t.Errorf("%s (%s) answers JSON but names no response shape (route table: .returns)", key, operationID(rt))
		case rt.response != nil && nonJSON:
			t.Errorf("%s names a response shape but is listed in nonJSONRoutes", key)
		}
	}
	for key := range nonJSONRoutes {
		if !seen[key] {
			t.Errorf("nonJSONRoutes lists %s, which is not in the route table", key)
		}
	}
}

// answerChecker calls a router and validates every 2xx JSON answer
// against the 2XX response schema of the operation that served it, taken
// from OpenAPIDocument. It also records each answer's shape (answerShape),
// so that the wire format is held to testdata/answer_shapes.txt: the
// schema follows the Go types, so only a record made apart from them
// notices a renamed key or a changed omission.
type answerChecker struct {
	t     *testing.T
	base  string
	token string
	// patterns resolves a request to its route-table pattern, as the
	// router does (an alias route resolves to its own pattern).
	patterns *http.ServeMux
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
	// validated counts the answers validated per route pattern.
	validated map[string]int
	// doc is the document as JSON values; shapes holds the distinct
	// shapes of each pattern's answers.
	doc    map[string]any
	shapes map[string]map[string]bool
}

// openAPIDocURL is where the test places the document for the validator.
const openAPIDocURL = "https://kici.test/openapi.json"

func newAnswerChecker(t *testing.T, base, token string) *answerChecker {
	t.Helper()
	raw, err := json.Marshal(OpenAPIDocument("test"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIDocURL, doc); err != nil {
		t.Fatal(err)
	}
	var plain map[string]any
	if err := json.Unmarshal(raw, &plain); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, rt := range routeTable() {
		mux.HandleFunc(rt.key(), func(http.ResponseWriter, *http.Request) {})
	}
	return &answerChecker{t: t, base: base, token: token, patterns: mux, compiler: c,
		schemas: map[string]*jsonschema.Schema{}, validated: map[string]int{}, doc: plain, shapes: map[string]map[string]bool{}}
}

// schema compiles the 2XX response schema of the operation pattern
// ("METHOD path"), resolving its $refs within the whole document.
func (c *answerChecker) schema(pattern string) *jsonschema.Schema {
	c.t.Helper()
	if s, ok := c.schemas[pattern]; ok {
		return s
	}
	method, path, _ := strings.Cut(pattern, " ")
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	loc := openAPIDocURL + "#/paths/" + esc.Replace(path) + "/" + strings.ToLower(method) + "/responses/2XX/content/application~1json/schema"
	s, err := c.compiler.Compile(loc)
	if err != nil {
		c.t.Fatalf("%s: compile %s: %v", pattern, loc, err)
	}
	c.schemas[pattern] = s
	return s
}

// call sends the request with the checker's token, requires a 2xx answer
// and validates its body; it returns the body decoded.
func (c *answerChecker) call(method, path, body string) map[string]any {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode < 200 || res.StatusCode > 299 {
		c.t.Errorf("%s %s: %d %s, want a 2xx answer to validate", method, path, res.StatusCode, raw)
		return nil
	}
	_, pattern := c.patterns.Handler(req)
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" {
		c.t.Errorf("%s %s (%s): Content-Type %q, want application/json", method, path, pattern, res.Header.Get("Content-Type"))
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		c.t.Errorf("%s %s: body is not JSON: %v", method, path, err)
		return nil
	}
	if err := c.schema(pattern).Validate(inst); err != nil {
		c.t.Errorf("%s %s (%s): the answer does not match the document:\n%s\nbody: %s", method, path, pattern, err, raw)
	}
	c.validated[pattern]++
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	method, path, _ = strings.Cut(pattern, " ")
	if c.shapes[pattern] == nil {
		c.shapes[pattern] = map[string]bool{}
	}
	c.shapes[pattern][c.answerShape(dig(c.doc, "paths", path, strings.ToLower(method), "responses", "2XX", "content", "application/json", "schema"), out)] = true
	return out
}

// dig follows keys down nested JSON objects; nil when one is missing.
func dig(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// answerShape writes v's shape under schema s: an object's keys (sorted)
// with their values' shapes, an array's distinct element shapes, s, n, b
// or null for a scalar. Where the schema leaves the value open it writes
// "any", for a map {*:<value shapes>}, and for another package's schema
// (provenance.Verdict) only its name: those are that package's contract.
func (c *answerChecker) answerShape(s map[string]any, v any) string {
	if alts, ok := s["anyOf"].([]any); ok && v != nil {
		s, _ = alts[0].(map[string]any) // [T, null]
	}
	if alts, ok := s["oneOf"].([]any); ok {
		for _, a := range alts {
			if alt, _ := c.resolve(a.(map[string]any)); hasAll(v, alt["required"]) {
				s = alt
				break
			}
		}
	}
	s, other := c.resolve(s)
	switch {
	case other != "":
		return other
	case len(s) == 0:
		return "any"
	}
	set := func(items []any, of map[string]any) string {
		seen := map[string]bool{}
		for _, x := range items {
			seen[c.answerShape(of, x)] = true
		}
		out := make([]string, 0, len(seen))
		for k := range seen {
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, "|")
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "s"
	case float64:
		return "n"
	case bool:
		return "b"
	case []any:
		items, _ := s["items"].(map[string]any)
		return "[" + set(x, items) + "]"
	case map[string]any:
		if vals, ok := s["additionalProperties"].(map[string]any); ok {
			var values []any
			for _, val := range x {
				values = append(values, val)
			}
			return "{*:" + set(values, vals) + "}"
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = k + ":" + c.answerShape(dig(s, "properties", k), x[k])
		}
		return "{" + strings.Join(keys, ",") + "}"
	}
	return "?"
}

// resolve follows a $ref to its component; for another package's schema
// it returns that schema's name instead.
func (c *answerChecker) resolve(s map[string]any) (map[string]any, string) {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s, ""
	}
	name := strings.TrimPrefix(ref, "#/components/schemas/")
	if strings.Contains(name, ".") {
		return nil, name
	}
	return dig(c.doc, "components", "schemas", name), ""
}

// hasAll reports whether object v has every key of required.
func hasAll(v, required any) bool {
	m, _ := v.(map[string]any)
	names, _ := required.([]any)
	for _, n := range names {
		if _, ok := m[n.(string)]; !ok {
			return false
		}
	}
	return m != nil
}

var updateShapes = flag.Bool("update-answer-shapes", false, "rewrite testdata/answer_shapes.txt from the answers seen")

// answerShapesFile holds every shape each route answered with in
// TestOpenAPIResponsesMatchRealAnswers, one "METHOD path<TAB>shape" a line.
const answerShapesFile = "testdata/answer_shapes.txt"

// checkShapes compares the recorded shapes with answerShapesFile (or
// rewrites it with -update-answer-shapes).
func (c *answerChecker) checkShapes() {
	c.t.Helper()
	var lines []string
	for pattern, shapes := range c.shapes {
		for sh := range shapes {
			lines = append(lines, pattern+"\t"+sh)
		}
	}
	sort.Strings(lines)
	got := strings.Join(lines, "\n") + "\n"
	if *updateShapes {
		if err := os.MkdirAll(filepath.Dir(answerShapesFile), 0o755); err != nil {
			c.t.Fatal(err)
		}
		if err := os.WriteFile(answerShapesFile, []byte(got), 0o644); err != nil {
			c.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(answerShapesFile)
	if err != nil {
		c.t.Fatal(err)
	}
	wantSet := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		wantSet[l] = true
	}
	for _, l := range lines {
		if !wantSet[l] {
			c.t.Errorf("answer shape not in %s (the JSON on the wire changed; if on purpose, rerun with -update-answer-shapes):\n%s", answerShapesFile, l)
		}
		delete(wantSet, l)
	}
	for l := range wantSet {
		c.t.Errorf("answer shape of %s no longer seen:\n%s", answerShapesFile, l)
	}
}

// unvalidated lists the routes with a response shape no call validated.
func (c *answerChecker) unvalidated() []string {
	var out []string
	for _, rt := range routeTable() {
		if rt.response != nil && c.validated[rt.key()] == 0 {
			out = append(out, rt.key())
		}
	}
	sort.Strings(out)
	return out
}

// newTestServer serves h until the test ends.
func newTestServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
