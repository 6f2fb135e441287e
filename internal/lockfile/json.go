package lockfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"kici.dev/kici/internal/runs/status"
)

// marshalNoEscape marshals v like json.Marshal but without HTML escaping
// and without a trailing newline.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsCompat rewrites Go's \u2028 and \u2029 string escapes to the literal
// characters, as JavaScript's JSON.stringify emits them. It only touches
// escapes preceded by an even number of backslashes (real escapes).
func jsCompat(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	var out bytes.Buffer
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+5]) == "202" && (b[i+5] == '8' || b[i+5] == '9') {
			if b[i+5] == '8' {
				out.WriteString("\u2028")
			} else {
				out.WriteString("\u2029")
			}
			i += 5
			continue
		}
		if b[i] == '\\' && i+1 < len(b) {
			out.WriteByte(b[i])
			out.WriteByte(b[i+1])
			i++
			continue
		}
		out.WriteByte(b[i])
	}
	return out.Bytes()
}

// MarshalJSON writes a need as a plain job name when RunOn is nil or exactly
// ["success"], and as {name, runOn} (or {group, runOn}) otherwise.
func (n Need) MarshalJSON() ([]byte, error) {
	if n.Group == "" && (n.RunOn == nil || slices.Equal(n.RunOn, []status.Job{status.JobSuccess})) {
		return marshalNoEscape(n.Name)
	}
	runOn := n.RunOn
	if runOn == nil {
		runOn = []status.Job{status.JobSuccess}
	}
	if n.Group != "" {
		return marshalNoEscape(struct {
			Group string       `json:"group"`
			RunOn []status.Job `json:"runOn"`
		}{n.Group, runOn})
	}
	return marshalNoEscape(struct {
		Name  string       `json:"name"`
		RunOn []status.Job `json:"runOn"`
	}{n.Name, runOn})
}

// UnmarshalJSON reads a plain string (RunOn = ["success"]) or an object
// {name, runOn} / {group, runOn}. A missing runOn means ["success"].
func (n *Need) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*n = Need{Name: s, RunOn: []status.Job{status.JobSuccess}}
		return nil
	}
	var obj struct {
		Name  string       `json:"name"`
		Group string       `json:"group"`
		RunOn []status.Job `json:"runOn"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("need must be a job name or {name, runOn}: %w", err)
	}
	if obj.RunOn == nil {
		obj.RunOn = []status.Job{status.JobSuccess}
	}
	*n = Need{Name: obj.Name, Group: obj.Group, RunOn: obj.RunOn}
	return nil
}

// IncludeKeys returns the key order of j.Include[i]: the authored order when
// known (YAML source or lock JSON), else the keys sorted.
func (j *Job) IncludeKeys(i int) []string {
	entry := j.Include[i]
	if i < len(j.includeKeys) && sameKeys(j.includeKeys[i], entry) {
		return slices.Clone(j.includeKeys[i])
	}
	keys := make([]string, 0, len(entry))
	for k := range entry {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SetIncludeKeys records the authored key order of each Include entry.
// Orders that do not list exactly the entry's keys are ignored.
func (j *Job) SetIncludeKeys(order [][]string) {
	j.includeKeys = make([][]string, len(order))
	for i, o := range order {
		j.includeKeys[i] = slices.Clone(o)
	}
}

func sameKeys(keys []string, m map[string]string) bool {
	if len(keys) != len(m) {
		return false
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// MarshalJSON encodes the job with its fields in KiCI emission order and the
// Include entries in their authored key order (Go maps would sort them).
// HTML characters are not escaped.
func (j Job) MarshalJSON() ([]byte, error) {
	type plain Job
	b, err := marshalNoEscape(plain(j))
	if err != nil || len(j.Include) == 0 {
		return b, err
	}
	var inc bytes.Buffer
	inc.WriteByte('[')
	for i, entry := range j.Include {
		if i > 0 {
			inc.WriteByte(',')
		}
		inc.WriteByte('{')
		for k, key := range j.IncludeKeys(i) {
			if k > 0 {
				inc.WriteByte(',')
			}
			kb, _ := marshalNoEscape(key)
			vb, _ := marshalNoEscape(entry[key])
			inc.Write(kb)
			inc.WriteByte(':')
			inc.Write(vb)
		}
		inc.WriteByte('}')
	}
	inc.WriteByte(']')
	return spliceMember(b, "include", inc.Bytes())
}

// spliceMember replaces the value of top-level member key in the JSON object
// b with val.
func spliceMember(b []byte, key string, val []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		afterKey := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if tok == key {
			end := int(dec.InputOffset())
			start := int(afterKey) + bytes.IndexByte(b[afterKey:], ':') + 1
			for start < end && (b[start] == ' ' || b[start] == '\n' || b[start] == '\t' || b[start] == '\r') {
				start++
			}
			out := make([]byte, 0, len(b)-(end-start)+len(val))
			out = append(out, b[:start]...)
			out = append(out, val...)
			return append(out, b[end:]...), nil
		}
	}
	return b, nil
}

// UnmarshalJSON decodes a job and remembers the key order of its Include
// entries.
func (j *Job) UnmarshalJSON(data []byte) error {
	type plain Job
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*j = Job(p)
	if len(j.Include) == 0 {
		return nil
	}
	var raw struct {
		Include []json.RawMessage `json:"include"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	order := make([][]string, len(raw.Include))
	for i, r := range raw.Include {
		keys, err := objectKeys(r)
		if err != nil {
			return err
		}
		order[i] = keys
	}
	j.includeKeys = order
	return nil
}

// objectKeys returns the member names of a JSON object in document order.
func objectKeys(data []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("expected an object")
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Encode renders a lock file as kici writes it: 2-space indentation, no HTML
// escaping, U+2028/U+2029 unescaped (as JavaScript writes them) and a
// trailing newline.
func Encode(lf *LockFile) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(lf); err != nil {
		return nil, fmt.Errorf("encode lock file: %w", err)
	}
	return jsCompat(buf.Bytes()), nil
}

// ContentHash computes the top-level contentHash of lf: lower-case hex
// sha256 of the compact JSON of {schemaVersion, source, workflows} in
// emission order, encoded as JavaScript's JSON.stringify would (KiCI
// generator.ts). lf.ContentHash and lf.LockfileHash are not
// inputs.
func ContentHash(lf *LockFile) (string, error) {
	b, err := marshalNoEscape(struct {
		SchemaVersion int        `json:"schemaVersion"`
		Source        SourceRef  `json:"source"`
		Workflows     []Workflow `json:"workflows"`
	}{lf.SchemaVersion, lf.Source, lf.Workflows})
	if err != nil {
		return "", fmt.Errorf("hash lock file: %w", err)
	}
	sum := sha256.Sum256(jsCompat(b))
	return hex.EncodeToString(sum[:]), nil
}

// HashLockJSON computes the top-level contentHash of a lock document given
// as raw JSON, preserving its key order and values exactly (so it also
// verifies locks with fields this package does not model). It fails when
// data is not a JSON object.
func HashLockJSON(data []byte) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return "", fmt.Errorf("hash lock file: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	for _, k := range []string{"schemaVersion", "source", "workflows"} {
		v, ok := top[k]
		if !ok {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.WriteString(`"` + k + `":`)
		if err := writeJSCompact(&buf, json.NewDecoder(bytes.NewReader(v))); err != nil {
			return "", fmt.Errorf("hash lock file: %w", err)
		}
	}
	buf.WriteByte('}')
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// writeJSCompact re-emits one JSON value compactly with JSON.stringify
// string escaping, keeping key order and number text.
func writeJSCompact(w *bytes.Buffer, dec *json.Decoder) error {
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			w.WriteByte('{')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				k, err := dec.Token()
				if err != nil {
					return err
				}
				w.WriteString(jsQuote(k.(string)))
				w.WriteByte(':')
				if err := writeJSCompact(w, dec); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			w.WriteByte('}')
		case '[':
			w.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				if err := writeJSCompact(w, dec); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			w.WriteByte(']')
		}
	case string:
		w.WriteString(jsQuote(t))
	case json.Number:
		w.WriteString(t.String())
	case bool:
		if t {
			w.WriteString("true")
		} else {
			w.WriteString("false")
		}
	case nil:
		w.WriteString("null")
	}
	return nil
}

// jsQuote quotes s as JavaScript's JSON.stringify does.
func jsQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// WorkflowContentHash computes a per-workflow contentHash:
// sha256("5:" + source) with CRLF and lone CR normalized to LF, lower-case
// hex (KiCI hasher.ts).
func WorkflowContentHash(source []byte) string {
	s := strings.ReplaceAll(string(source), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s", CompileSchemaVersion, s)))
	return hex.EncodeToString(sum[:])
}
