package lockfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/goccy/go-yaml/ast"
)

// MaxMatrixLegs is the largest number of legs a matrix may expand to
// (KiCI FanoutError / compiler E104).
const MaxMatrixLegs = 256

// maxProduct bounds the cartesian product generated before exclude entries
// are applied, so a huge matrix fails fast instead of exhausting memory.
const maxProduct = 1 << 16

// Leg is one expanded matrix combination of a job (KiCI matrix/expand.ts).
type Leg struct {
	// Name is "<job> (<suffix>)", or the job name when the job has no matrix.
	Name string
	// Values maps dimension → value; nil when the job has no matrix. A list
	// matrix yields the single key "value".
	Values map[string]string
	// Keys is the order of Values' keys used in the suffix: sorted
	// dimensions for product legs, authored order for include legs.
	Keys []string
}

// ExpandMatrix expands job's static matrix into legs following KiCI
// packages/engine/src/matrix/expand.ts and format.ts:
//   - no matrix ⇒ one leg named job.Name with nil Values;
//   - list matrix ⇒ one leg {value: v} per value, named "job (v)";
//   - object matrix ⇒ dimensions sorted with LocaleCompare, cartesian
//     product with the last dimension varying fastest, then Exclude (drop
//     legs where every key of an entry is equal; {} ignored), then Include
//     (append unless an identical leg exists; {} ignored);
//   - suffix = the values joined by ", " in Keys order.
//
// It returns an error when the matrix is dynamic or malformed, or expands to
// zero or more than MaxMatrixLegs legs.
func ExpandMatrix(job *Job) ([]Leg, error) {
	if job.Matrix == nil {
		return []Leg{{Name: job.Name}}, nil
	}
	if job.Matrix.Type != "" && job.Matrix.Type != MatrixStatic {
		return nil, fmt.Errorf("job %q: matrix type %q is not supported (only static matrices)", job.Name, job.Matrix.Type)
	}
	var legs []Leg
	vals := bytes.TrimSpace(job.Matrix.Values)
	switch {
	case len(vals) > 0 && vals[0] == '[':
		list, err := scalarList(vals)
		if err != nil {
			return nil, fmt.Errorf("job %q: matrix values: %w", job.Name, err)
		}
		for _, v := range list {
			legs = append(legs, Leg{Values: map[string]string{"value": v}, Keys: []string{"value"}})
		}
	case len(vals) > 0 && vals[0] == '{':
		dims, err := matrixDims(vals)
		if err != nil {
			return nil, fmt.Errorf("job %q: matrix values: %w", job.Name, err)
		}
		total := 1
		for _, d := range dims {
			total *= len(d.values)
			if total > maxProduct {
				return nil, fmt.Errorf("job %q: matrix has more than %d combinations (maximum %d legs)", job.Name, maxProduct, MaxMatrixLegs)
			}
		}
		legs = product(dims)
	default:
		return nil, fmt.Errorf("job %q: matrix values must be a list or an object of lists", job.Name)
	}
	legs = slices.DeleteFunc(legs, func(l Leg) bool {
		for _, ex := range job.Exclude {
			if len(ex) > 0 && subsetEqual(ex, l.Values) {
				return true
			}
		}
		return false
	})
	for i, inc := range job.Include {
		if len(inc) == 0 {
			continue
		}
		if slices.ContainsFunc(legs, func(l Leg) bool { return maps.Equal(l.Values, inc) }) {
			continue
		}
		legs = append(legs, Leg{Values: maps.Clone(inc), Keys: job.IncludeKeys(i)})
	}
	if len(legs) == 0 {
		return nil, fmt.Errorf("job %q: matrix expands to no legs", job.Name)
	}
	if len(legs) > MaxMatrixLegs {
		return nil, fmt.Errorf("job %q: matrix expands to %d legs (maximum %d)", job.Name, len(legs), MaxMatrixLegs)
	}
	for i := range legs {
		legs[i].Name = LegName(job.Name, legs[i].Keys, legs[i].Values)
	}
	return legs, nil
}

// LegName formats a leg name "<job> (<v1>, <v2>…)" with values in keys order.
func LegName(job string, keys []string, values map[string]string) string {
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, values[k])
	}
	return job + " (" + strings.Join(parts, ", ") + ")"
}

type dim struct {
	name   string
	values []string
}

func product(dims []dim) []Leg {
	if len(dims) == 0 {
		return nil
	}
	slices.SortStableFunc(dims, func(a, b dim) int { return LocaleCompare(a.name, b.name) })
	keys := make([]string, len(dims))
	for i, d := range dims {
		if len(d.values) == 0 {
			return nil
		}
		keys[i] = d.name
	}
	var legs []Leg
	idx := make([]int, len(dims))
	for {
		vals := make(map[string]string, len(dims))
		for i, d := range dims {
			vals[d.name] = d.values[idx[i]]
		}
		legs = append(legs, Leg{Values: vals, Keys: slices.Clone(keys)})
		i := len(dims) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(dims[i].values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return legs
		}
	}
}

func subsetEqual(entry, values map[string]string) bool {
	for k, v := range entry {
		if got, ok := values[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// matrixDims decodes an object of lists, keeping authored dimension order.
func matrixDims(data []byte) ([]dim, error) {
	keys, err := objectKeys(data)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	dims := make([]dim, 0, len(keys))
	for _, k := range keys {
		list, err := scalarList(m[k])
		if err != nil {
			return nil, fmt.Errorf("dimension %q: %w", k, err)
		}
		dims = append(dims, dim{name: k, values: list})
	}
	return dims, nil
}

// scalarList decodes a JSON list of strings (numbers and booleans are taken
// by their JSON text).
func scalarList(data []byte) ([]string, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("expected a list of strings: %w", err)
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		r = bytes.TrimSpace(r)
		switch {
		case len(r) > 0 && r[0] == '"':
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return nil, err
			}
			out = append(out, s)
		case len(r) > 0 && (r[0] == '-' || (r[0] >= '0' && r[0] <= '9') || r[0] == 't' || r[0] == 'f'):
			out = append(out, string(r))
		default:
			return nil, fmt.Errorf("matrix value %s is not a string", r)
		}
	}
	return out, nil
}

// LocaleCompare orders strings the way JavaScript's String.localeCompare
// does for the ASCII-ish names found in matrices and agent ids (ICU root
// collation, approximated): punctuation and spaces sort before digits, digits
// before letters, letters compare case-insensitively, and only when the
// strings are otherwise equal does lower case sort before upper case.
// It returns -1, 0 or +1.
func LocaleCompare(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		ca, cb := collClass(ra[i]), collClass(rb[i])
		if ca != cb {
			return cmpInt(ca, cb)
		}
		la, lb := unicode.ToLower(ra[i]), unicode.ToLower(rb[i])
		if la != lb {
			return cmpInt(int(la), int(lb))
		}
	}
	if len(ra) != len(rb) {
		return cmpInt(len(ra), len(rb))
	}
	// tertiary: lower case first
	for i := range ra {
		if ra[i] != rb[i] {
			if unicode.IsLower(ra[i]) && !unicode.IsLower(rb[i]) {
				return -1
			}
			if !unicode.IsLower(ra[i]) && unicode.IsLower(rb[i]) {
				return 1
			}
			return cmpInt(int(ra[i]), int(rb[i]))
		}
	}
	return 0
}

func collClass(r rune) int {
	switch {
	case unicode.IsDigit(r):
		return 1
	case unicode.IsLetter(r):
		return 2
	default:
		return 0
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *yfile) matrix(j *Job, n ast.Node, what string) {
	r := f.resolve(n)
	before := len(f.errs)
	if seq, ok := r.(*ast.SequenceNode); ok {
		vals := make([]string, 0, len(seq.Values))
		for _, it := range seq.Values {
			if s, ok := f.str(it, what+" values"); ok {
				vals = append(vals, s)
			}
		}
		raw, _ := marshalNoEscape(vals)
		j.Matrix = &Matrix{Type: MatrixStatic, Values: raw}
	} else {
		entries, ok := f.mapping(n, what)
		if !ok {
			return
		}
		var buf strings.Builder
		buf.WriteByte('{')
		dims := map[string]bool{}
		var includeNode, excludeNode ast.Node
		for _, e := range entries {
			switch e.key {
			case "include":
				includeNode = e.val
				continue
			case "exclude":
				excludeNode = e.val
				continue
			}
			items, ok := f.sequence(e.val, what+" dimension "+e.key, false)
			if !ok {
				continue
			}
			if len(items) == 0 {
				f.errorf(e.val, "%s dimension %q has no values", what, e.key)
				continue
			}
			vals := make([]string, 0, len(items))
			for _, it := range items {
				if s, ok := f.str(it, what+" dimension "+e.key+" values"); ok {
					vals = append(vals, s)
				}
			}
			if len(dims) > 0 {
				buf.WriteByte(',')
			}
			dims[e.key] = true
			kb, _ := marshalNoEscape(e.key)
			vb, _ := marshalNoEscape(vals)
			buf.Write(kb)
			buf.WriteByte(':')
			buf.Write(vb)
		}
		buf.WriteByte('}')
		j.Matrix = &Matrix{Type: MatrixStatic, Values: json.RawMessage(buf.String())}
		if excludeNode != nil {
			j.Exclude, _ = f.matrixEntries(excludeNode, what+" exclude")
			for i, ex := range j.Exclude {
				for k := range ex {
					if !dims[k] {
						f.errorf(excludeNode, "%s entry %d: %q is not a matrix dimension", what, i+1, k)
					}
				}
			}
		}
		if includeNode != nil {
			var order [][]string
			j.Include, order = f.matrixEntries(includeNode, what+" include")
			j.SetIncludeKeys(order)
		}
	}
	if len(f.errs) > before {
		return
	}
	legs, err := ExpandMatrix(j)
	if err != nil {
		f.errorf(n, "%s: %s", what, strings.TrimPrefix(err.Error(), fmt.Sprintf("job %q: ", j.Name)))
		return
	}
	_ = legs
}

func (f *yfile) matrixEntries(n ast.Node, what string) ([]map[string]string, [][]string) {
	items, ok := f.sequence(n, what, false)
	if !ok {
		return nil, nil
	}
	var out []map[string]string
	var order [][]string
	for _, it := range items {
		entries, ok := f.mapping(it, what+" entries")
		if !ok {
			continue
		}
		m := make(map[string]string, len(entries))
		var keys []string
		for _, e := range entries {
			if s, ok := f.str(e.val, what+" value of "+e.key); ok {
				m[e.key] = s
				keys = append(keys, e.key)
			}
		}
		out = append(out, m)
		order = append(order, keys)
	}
	return out, order
}
