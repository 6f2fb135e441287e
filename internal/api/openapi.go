package api

import (
	"encoding/json"
	"net/http"
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
	sb := &schemaBuilder{schemas: map[string]any{
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
			op[PermissionExtension] = rt.perm
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

func responses(sb *schemaBuilder, rt route) map[string]any {
	ok := map[string]any{"description": "Success"}
	if rt.response != nil {
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": sb.of(reflect.TypeOf(rt.response))}}
	}
	errResp := map[string]any{"description": "Error", "content": map[string]any{
		"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	return map[string]any{"2XX": ok, "default": errResp}
}

// schemaBuilder reflects Go types into JSON Schema (the 2020-12 dialect
// OpenAPI 3.1 uses), putting named structs under components/schemas.
type schemaBuilder struct {
	schemas map[string]any
}

var (
	timeType    = reflect.TypeOf(time.Time{})
	rawJSONType = reflect.TypeOf(json.RawMessage{})
)

// of returns the schema of t: a $ref for a named struct, inline otherwise;
// a pointer allows null.
func (sb *schemaBuilder) of(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawJSONType:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner := sb.of(t.Elem())
		if typ, ok := inner["type"].(string); ok {
			nullable := map[string]any{}
			for k, v := range inner {
				nullable[k] = v
			}
			nullable["type"] = []string{typ, "null"}
			return nullable
		}
		return map[string]any{"anyOf": []any{inner, map[string]any{"type": "null"}}}
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
		if _, done := sb.schemas[name]; !done {
			sb.schemas[name] = map[string]any{} // placeholder: breaks recursion
			sb.schemas[name] = sb.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

// object is the inline schema of struct t: one property per JSON field,
// embedded structs flattened as encoding/json does, fields without
// omitempty required.
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
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
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
