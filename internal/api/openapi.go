package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"reflect"
	"runtime"
	"strings"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// OpenAPI document of the route table (OpenAPI 3.1.0,
// https://spec.openapis.org/oas/v3.1.0). Each operation carries its path,
// method, path and query parameters, a summary, the RBAC permission it needs as the
// extension x-kici-permission (absent on public routes, whose security
// list is empty), and the request and response schemas the route table
// names, reflected from the Go types' json tags.

// PermissionExtension is the OpenAPI operation extension naming the RBAC
// permission a route needs (auth.Perm*; docs/security.md has the role
// matrix).
const PermissionExtension = "x-kici-permission"

// OpenAPIDocument builds the OpenAPI 3.1 description of every route of the
// route table; version is the orchestrator's version (info.version). The
// result marshals to JSON as is.
func OpenAPIDocument(version string) map[string]any {
	// "Error" is taken: a Go type of that name would panic below.
	sb := &schemaBuilder{named: map[string]reflect.Type{"Error": nil}, schemas: map[string]any{
		"Error": map[string]any{
			"type":       "object",
			"required":   []string{"error"},
			"properties": map[string]any{"error": map[string]any{"type": "string"}},
		},
	}}
	paths := map[string]map[string]any{}
	for _, rt := range routeTable() {
		op := map[string]any{
			"operationId": operationID(rt),
			"summary":     rt.summary,
			"responses":   responses(sb, rt),
		}
		if rt.perm == "" {
			op["security"] = []any{}
		} else {
			op["security"] = []any{map[string]any{"bearerAuth": []string{}}}
			op[PermissionExtension] = string(rt.perm)
		}
		var params []any
		for _, p := range pathParams(rt.path) {
			params = append(params, map[string]any{"name": p, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, p := range rt.queryParams {
			params = append(params, map[string]any{"name": p, "in": "query", "schema": map[string]any{"type": "string"}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.request != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": sb.of(reflect.TypeOf(rt.request))}}}
		}
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "kici admin API",
			"version":     version,
			"description": "The admin HTTP API of a kici orchestrator (KiCI's admin surface). Every admin route needs a bearer token whose role grants the operation's x-kici-permission; errors are {\"error\": \"...\"}.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearerAuth": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas":         sb.schemas,
		},
	}
}

// operationID is the handler's Go method name ("listRuns"), unique per
// route; an alias route gets one from its method and path.
func operationID(rt route) string {
	if rt.handle != nil {
		name := runtime.FuncForPC(reflect.ValueOf(rt.handle).Pointer()).Name()
		name = name[strings.LastIndexByte(name, '.')+1:]
		return strings.TrimSuffix(name, "-fm")
	}
	id := strings.ToLower(rt.method)
	for _, seg := range strings.Split(strings.TrimPrefix(rt.path, apitypes.AdminPrefix), "/") {
		seg = strings.Trim(seg, "{}")
		if seg != "" {
			id += strings.ToUpper(seg[:1]) + seg[1:]
		}
	}
	return id
}

// oneOf is a route-table response naming the shapes a route answers with
// depending on its query (GET /runs: a page, or with ?count=true a
// count); exactly one of them matches an answer.
type oneOf []any

func responses(sb *schemaBuilder, rt route) map[string]any {
	ok := map[string]any{"description": "Success"}
	if rt.response != nil {
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": sb.response(rt.response)}}
	}
	errResp := map[string]any{"description": "Error", "content": map[string]any{
		"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	return map[string]any{"2XX": ok, "default": errResp}
}

// schemaBuilder reflects Go types into JSON Schema (the 2020-12 dialect
// OpenAPI 3.1 uses), putting named structs under components/schemas:
// apitypes' under their Go name, another package's under
// "<package>.<Name>" (provenance.Verdict), so two packages' types of one
// name never share a schema.
type schemaBuilder struct {
	schemas map[string]any
	// named maps each component name to the Go type it describes.
	named map[string]reflect.Type
}

var (
	timeType      = reflect.TypeOf(time.Time{})
	rawJSONType   = reflect.TypeOf(json.RawMessage{})
	marshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	apitypesPath  = reflect.TypeOf(apitypes.RunView{}).PkgPath()
)

// response returns the schema of a route's response (a zero value, or a
// oneOf of them).
func (sb *schemaBuilder) response(v any) map[string]any {
	alts, ok := v.(oneOf)
	if !ok {
		return sb.of(reflect.TypeOf(v))
	}
	out := make([]any, 0, len(alts))
	for _, a := range alts {
		out = append(out, sb.of(reflect.TypeOf(a)))
	}
	return map[string]any{"oneOf": out}
}

// of returns the schema of t: a $ref for a named struct, inline otherwise;
// a pointer allows null. A type with its own MarshalJSON (other than
// time.Time and json.RawMessage) may write any JSON, so its schema is
// empty.
func (sb *schemaBuilder) of(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawJSONType:
		return map[string]any{}
	case t.Kind() != reflect.Pointer && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)):
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(sb.of(t.Elem()))
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": sb.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": sb.of(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return sb.object(t)
		}
		name := t.Name()
		if t.PkgPath() != apitypesPath {
			name = path.Base(t.PkgPath()) + "." + name
		}
		if prev, done := sb.named[name]; !done {
			sb.named[name] = t
			sb.schemas[name] = map[string]any{} // placeholder: breaks recursion
			sb.schemas[name] = sb.object(t)
		} else if prev != t {
			panic(fmt.Sprintf("openapi: %s and %s both named schema %q", prev, t, name))
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

// nullable is schema s also allowing null: ["T", "null"] for a typed
// schema, anyOf with null otherwise (a $ref); an empty schema already
// allows null.
func nullable(s map[string]any) map[string]any {
	if len(s) == 0 {
		return s
	}
	if typ, ok := s["type"].(string); ok {
		out := map[string]any{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []string{typ, "null"}
		return out
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// object is the inline schema of struct t: one property per JSON field,
// embedded structs flattened as encoding/json does, fields without
// omitempty or omitzero required (but not those of an embedded pointer,
// absent while it is nil). A field tagged nullable:"true" may also be
// null: a slice or map the handler may leave nil (a pointer always may).
func (sb *schemaBuilder) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	sb.fields(t, props, &required)
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (sb *schemaBuilder) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				var none []string
				sb.fields(ft.Elem(), props, &none)
				continue
			}
			if ft.Kind() == reflect.Struct {
				sb.fields(ft, props, required)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		props[name] = sb.of(f.Type)
		if f.Tag.Get("nullable") == "true" {
			props[name] = nullable(props[name].(map[string]any))
		}
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}

// openAPI is GET /api/v1/admin/openapi.json: the document above. Public,
// like /health: it is the same for every caller, is generated from the
// open-source route table and holds no data, so API clients and code
// generators can read it before they hold a token.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, OpenAPIDocument(s.d.Version))
}
