package lockfile

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// yfile is the per-file state of the YAML walker: it records errors with
// positions and resolves anchors and aliases.
type yfile struct {
	path    string // repo-relative, forward slashes
	errs    CompileErrors
	anchors map[string]ast.Node

	// Expression scope (conditions.go): the workflow's input names, the
	// current job's scope, whether a job is being decoded, and the job env
	// values waiting for that scope.
	inputNames []string
	inputTypes map[string]string
	scope      *jobScope
	// earlierSteps are the names of the steps before the one being
	// decoded (nil outside a step): a step's env templates may read them.
	earlierSteps []string
	inJob        bool
	pendingEnv   map[string]pendingEnvVal
	mergeDepth   int

	// Reusable pieces (pieces.go): the state shared with every piece the
	// workflow expands, the library this file belongs to (nil = the
	// repository), the chain of files that led here, the `${{ with.X }}`
	// values of this piece's use, and the needs the using job gave a job
	// piece (hasPreset).
	pieces      *pieceState
	lib         *Library
	useStack    []string
	with        map[string]string
	presetNeeds []Need
	presetRefs  []needRef
	hasPreset   bool
}

// kv is one mapping entry.
type kv struct {
	key   string
	knode ast.Node
	val   ast.Node
	// merged marks an entry that came from a merge key (<<).
	merged bool
}

// nodePos returns the 1-based line and column where n starts (the first key
// of a block mapping).
func nodePos(n ast.Node) (int, int) {
	switch t := n.(type) {
	case nil:
		return 0, 0
	case *ast.MappingNode:
		if !t.IsFlowStyle && len(t.Values) > 0 && t.Values[0].Key != nil {
			return nodePos(t.Values[0].Key)
		}
	case *ast.MappingValueNode:
		if t.Key != nil {
			return nodePos(t.Key)
		}
	case *ast.AnchorNode:
		if t.Value != nil {
			return nodePos(t.Value)
		}
	case *ast.TagNode:
		if t.Value != nil {
			return nodePos(t.Value)
		}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, 0
	}
	return tk.Position.Line, tk.Position.Column
}

func (f *yfile) errorf(n ast.Node, format string, args ...any) {
	line, col := nodePos(n)
	f.errs = append(f.errs, &CompileError{File: f.path, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)})
}

// parseYAML parses src and returns the single document body, or nil after
// recording a syntax error.
func (f *yfile) parseYAML(src []byte) ast.Node {
	file, err := parser.ParseBytes(src, 0)
	if err != nil {
		var se *yaml.SyntaxError
		if errors.As(err, &se) && se.Token != nil && se.Token.Position != nil {
			f.errs = append(f.errs, &CompileError{File: f.path, Line: se.Token.Position.Line, Column: se.Token.Position.Column, Msg: "YAML syntax error: " + se.GetMessage()})
		} else {
			f.errs = append(f.errs, &CompileError{File: f.path, Msg: "YAML syntax error: " + err.Error()})
		}
		return nil
	}
	var bodies []ast.Node
	for _, d := range file.Docs {
		if d != nil && d.Body != nil {
			bodies = append(bodies, d.Body)
		}
	}
	if len(bodies) == 0 {
		f.errs = append(f.errs, &CompileError{File: f.path, Line: 1, Column: 1, Msg: "empty workflow file"})
		return nil
	}
	if len(bodies) > 1 {
		f.errorf(bodies[1], "a workflow file holds exactly one YAML document (one workflow per file)")
		return nil
	}
	f.anchors = map[string]ast.Node{}
	ast.Walk(anchorCollector(f.anchors), bodies[0])
	return bodies[0]
}

type anchorCollector map[string]ast.Node

// Visit records anchor definitions.
func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

// resolve strips tags and anchors and follows aliases.
func (f *yfile) resolve(n ast.Node) ast.Node {
	for i := 0; i < 32 && n != nil; i++ {
		switch t := n.(type) {
		case *ast.TagNode:
			n = t.Value
		case *ast.AnchorNode:
			n = t.Value
		case *ast.AliasNode:
			if t.Value == nil {
				return nil
			}
			target, ok := f.anchors[t.Value.GetToken().Value]
			if !ok {
				return nil
			}
			n = target
		default:
			return n
		}
	}
	return n
}

func isNull(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, ok := n.(*ast.NullNode)
	return ok
}

// mapping returns the entries of a mapping node, in document order.
func (f *yfile) mapping(n ast.Node, what string) ([]kv, bool) {
	orig := n
	n = f.resolve(n)
	var values []*ast.MappingValueNode
	switch t := n.(type) {
	case *ast.MappingNode:
		values = t.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{t}
	default:
		f.errorf(orig, "%s must be a mapping, got %s", what, describe(n))
		return nil, false
	}
	out := make([]kv, 0, len(values))
	for _, mv := range values {
		if mv.Key == nil {
			continue
		}
		if mv.Key.IsMergeKey() {
			out = append(out, f.mergeEntries(mv, what)...)
			continue
		}
		key, ok := f.scalar(mv.Key)
		if !ok {
			f.errorf(mv.Key, "%s keys must be strings", what)
			continue
		}
		out = append(out, kv{key: key, knode: mv.Key, val: mv.Value})
	}
	return applyMerges(out), true
}

// regexMapping decodes the {regex, flags} form of a pattern (n must be a
// mapping): it reports other keys and a missing or empty `regex`, and leaves
// checking the regex to the caller, whose rules differ (a trigger pattern
// may be negated with "!", a gate's is bounded in length).
func (f *yfile) regexMapping(n ast.Node, what string) (src, flags string, ok bool) {
	entries, ok := f.mapping(n, what)
	if !ok {
		return "", "", false
	}
	f.strict(entries, what, "regex", "flags")
	for _, e := range entries {
		switch e.key {
		case "regex":
			src, _ = f.str(e.val, what+" regex")
		case "flags":
			flags, _ = f.str(e.val, what+" flags")
		}
	}
	if src == "" {
		f.errorf(n, "%s: a {regex, flags} entry needs a non-empty `regex`", what)
		return "", "", false
	}
	return src, flags, true
}

// strict reports unknown keys of a mapping.
func (f *yfile) strict(entries []kv, what string, allowed ...string) {
	for _, e := range entries {
		found := false
		for _, a := range allowed {
			if a == e.key {
				found = true
				break
			}
		}
		if !found {
			f.errorf(e.knode, "unknown key %q in %s%s (allowed: %s)", e.key, what, didYouMean(e.key, allowed), strings.Join(allowed, ", "))
		}
	}
}

// scalar returns the text of a scalar node; numbers and booleans keep their
// source text (so `1.20` stays "1.20").
func (f *yfile) scalar(n ast.Node) (string, bool) {
	n = f.resolve(n)
	switch t := n.(type) {
	case *ast.StringNode:
		return f.substituteWith(t.Value), true
	case *ast.LiteralNode:
		if t.Value != nil {
			return f.substituteWith(t.Value.Value), true
		}
		return "", true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return t.GetToken().Value, true
	}
	return "", false
}

func describe(n ast.Node) string {
	switch n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode, *ast.FloatNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return n.Type().String()
}

// str decodes a string scalar (numbers and booleans are accepted by text).
func (f *yfile) str(n ast.Node, what string) (string, bool) {
	s, ok := f.scalar(n)
	if !ok {
		f.errorf(n, "%s must be a string, got %s", what, describe(f.resolve(n)))
	}
	return s, ok
}

// nonEmptyStr decodes a string that must not be empty.
func (f *yfile) nonEmptyStr(n ast.Node, what string) (string, bool) {
	s, ok := f.str(n, what)
	if ok && strings.TrimSpace(s) == "" {
		f.errorf(n, "%s must not be empty", what)
		return "", false
	}
	return s, ok
}

// boolean decodes a YAML boolean.
func (f *yfile) boolean(n ast.Node, what string) (bool, bool) {
	if b, ok := f.resolve(n).(*ast.BoolNode); ok {
		return b.Value, true
	}
	f.errorf(n, "%s must be true or false, got %s", what, describe(f.resolve(n)))
	return false, false
}

// sequence returns the items of a list node. A single scalar is accepted as a
// one-element list when single is true.
func (f *yfile) sequence(n ast.Node, what string, single bool) ([]ast.Node, bool) {
	r := f.resolve(n)
	switch t := r.(type) {
	case *ast.SequenceNode:
		return t.Values, true
	case *ast.NullNode, nil:
		return nil, true
	}
	if single {
		if _, ok := f.scalar(r); ok {
			return []ast.Node{n}, true
		}
	}
	f.errorf(n, "%s must be a list, got %s", what, describe(r))
	return nil, false
}

// strList decodes a list of non-empty strings (or a single string).
func (f *yfile) strList(n ast.Node, what string) ([]string, bool) {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	good := true
	for _, it := range items {
		s, ok := f.nonEmptyStr(it, what+" entries")
		if !ok {
			good = false
			continue
		}
		out = append(out, s)
	}
	return out, good
}

// duration decodes "30s", "10m", "1h30m", "500ms" or an integer number of
// milliseconds, and returns milliseconds. It must be positive.
func (f *yfile) duration(n ast.Node, what string) (int64, bool) {
	r := f.resolve(n)
	if in, ok := r.(*ast.IntegerNode); ok {
		ms, err := strconv.ParseInt(in.GetToken().Value, 10, 64)
		if err != nil || ms <= 0 {
			f.errorf(n, "%s must be a positive duration (like 30s, 10m, 1h) or a positive number of milliseconds, got %s", what, in.GetToken().Value)
			return 0, false
		}
		return ms, true
	}
	s, ok := f.scalar(r)
	if !ok {
		f.errorf(n, "%s must be a duration like 30s, 10m or 1h, got %s", what, describe(r))
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		f.errorf(n, "%s: invalid duration %q (use a number with a unit: ms, s, m, h — e.g. 30s, 10m, 1h30m)", what, s)
		return 0, false
	}
	if d <= 0 {
		f.errorf(n, "%s must be positive, got %q", what, s)
		return 0, false
	}
	if d%time.Millisecond != 0 {
		f.errorf(n, "%s must be a whole number of milliseconds, got %q", what, s)
		return 0, false
	}
	return d.Milliseconds(), true
}

// intRange decodes an integer within [lo, hi].
func (f *yfile) intRange(n ast.Node, what string, lo, hi int) (int, bool) {
	r := f.resolve(n)
	in, ok := r.(*ast.IntegerNode)
	if !ok {
		f.errorf(n, "%s must be an integer between %d and %d, got %s", what, lo, hi, describe(r))
		return 0, false
	}
	v, err := strconv.ParseInt(in.GetToken().Value, 0, 64)
	if err != nil || v < int64(lo) || v > int64(hi) || v > math.MaxInt32 {
		f.errorf(n, "%s must be between %d and %d, got %s", what, lo, hi, in.GetToken().Value)
		return 0, false
	}
	return int(v), true
}

// envMap decodes a mapping of environment variables.
func (f *yfile) envMap(n ast.Node, what string) map[string]string {
	return f.envVarMap(n, what, func(e kv) (string, bool) {
		if isNull(f.resolve(e.val)) {
			return "", true
		}
		v, ok := f.scalar(e.val)
		if !ok {
			f.errorf(e.val, "%s: value of %s must be a string, got %s", what, e.key, describe(f.resolve(e.val)))
			return "", false
		}
		f.envTemplate(e.val, v, e.key, f.inJob)
		return v, true
	})
}

// envVarMap decodes a mapping keyed by environment variable names (null is
// no mapping): it reports an invalid name and keeps each entry whose value
// decodes, value having reported the others.
func (f *yfile) envVarMap(n ast.Node, what string, value func(e kv) (string, bool)) map[string]string {
	if isNull(f.resolve(n)) {
		return nil
	}
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		if !validEnvName(e.key) {
			f.errorf(e.knode, "%s: %q is not a valid environment variable name (letters, digits and _, not starting with a digit)", what, e.key)
			continue
		}
		if v, ok := value(e); ok {
			out[e.key] = v
		}
	}
	return out
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// sortErrors orders errors by file, line, column.
func sortErrors(es CompileErrors) {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}
