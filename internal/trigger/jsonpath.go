package trigger

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/theory/jsonpath"

	"kici.dev/kici/internal/trigger/pattern"
)

// JSONPath filters (`match` / `not` of kici_event and generic_webhook
// triggers) follow KiCI's jsonpath-matcher.ts, with the
// paths evaluated by an RFC 9535 engine (github.com/theory/jsonpath)
// instead of jsonpath-plus:
//
//   - every key is a JSONPath; a path without a leading `$` is taken
//     relative to the root (`env` ≡ `$.env`, `[0]` ≡ `$[0]`);
//   - the expected value is compared strictly with each selected node
//     (42 ≠ "42"; numbers by value; null only equals null); an array lists
//     acceptable values; a string of the form /body/flags (flags from
//     gimsuy) is a JavaScript regex tested against string nodes only; an
//     expected object never matches;
//   - `match` passes when every key selects at least one node equal to its
//     expected value (an empty or absent object passes); `not` fails when
//     any key does (keys selecting nothing are ignored).
//
// jsonpath-plus extensions that RFC 9535 lacks (script expressions `(…)`,
// `@parent`, `^`, `~`) are rejected when the lock is compiled or loaded.

// JSONPathFilter is a compiled `match` or `not` object.
type JSONPathFilter struct {
	entries []pattern.JSONPathEntry
}

// CompileJSONPath parses one JSONPath expression (root `$` implied).
func CompileJSONPath(p string) (*jsonpath.Path, error) { return pattern.CompileJSONPath(p) }

// CompileJSONPathFilter compiles a raw `match`/`not` object (see
// pattern.ParseJSONPathFilter for the errors).
func CompileJSONPathFilter(raw json.RawMessage) (*JSONPathFilter, error) {
	es, err := pattern.ParseJSONPathFilter(raw)
	if err != nil {
		return nil, err
	}
	return &JSONPathFilter{entries: es}, nil
}

// Empty reports whether the filter has no keys.
func (f *JSONPathFilter) Empty() bool { return f == nil || len(f.entries) == 0 }

// entryMatch evaluates one key: found reports whether the path selected any
// node, matched whether some node equals the expected value.
func evalEntry(e *pattern.JSONPathEntry, doc any) (found, matched bool, got string) {
	nodes := e.Path.Select(doc)
	if len(nodes) == 0 {
		return false, false, missing
	}
	got = compactValue([]any(nodes))
	if len(nodes) == 1 {
		got = compactValue(nodes[0])
	}
	for _, n := range nodes {
		if valueMatches(e, n) {
			return true, true, got
		}
	}
	return true, false, got
}

func valueMatches(e *pattern.JSONPathEntry, n any) bool {
	if e.Regex != nil {
		s, ok := n.(string)
		return ok && e.Regex.MatchString(s)
	}
	if list, ok := e.Expected.([]any); ok {
		for _, want := range list {
			if strictEqual(n, want) {
				return true
			}
		}
		return false
	}
	return strictEqual(n, e.Expected)
}

// strictEqual is JavaScript `===` on decoded JSON scalars; objects and
// arrays never compare equal.
func strictEqual(a, b any) bool {
	switch av := a.(type) {
	case nil:
		return b == nil
	case string:
		bv, ok := b.(string)
		return ok && av == bv
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	case float64:
		bv, ok := b.(float64)
		return ok && av == bv
	}
	return false
}

// MatchJSONPath evaluates a compiled match (negate=false) or not
// (negate=true) filter against doc, appending one trace entry per key
// evaluated ("jsonpath match" / "jsonpath not"), and reports whether the
// trigger may continue.
func (f *JSONPathFilter) eval(doc any, negate bool, tr *tracer) bool {
	check := "jsonpath match"
	if negate {
		check = "jsonpath not"
	}
	for i := range f.entries {
		e := &f.entries[i]
		found, matched, got := evalEntry(e, doc)
		if !negate {
			reason := "no node equals the expected value"
			if !found {
				reason = "path selects nothing"
			}
			if !tr.add(check, e.Text, got, matched, reason) {
				return false
			}
			continue
		}
		if !tr.add(check, e.Text, got, !matched, "excluded: a node equals the expected value") {
			return false
		}
	}
	return true
}

// EvalJSONPath selects the nodes a path (compiled with CompileJSONPath)
// picks from doc, a value decoded by encoding/json.
func EvalJSONPath(p *jsonpath.Path, doc any) []any {
	return []any(p.Select(doc))
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func compactValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
