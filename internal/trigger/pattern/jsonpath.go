package pattern

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/theory/jsonpath"
)

// jsRegexLiteral recognizes an expected value written as /body/flags
// (KiCI jsonpath-matcher.ts; flags from gimsuy).
var jsRegexLiteral = regexp.MustCompile(`^/(.+)/([gimsuy]*)$`)

// JSONPathEntry is one compiled key of a `match`/`not` filter.
type JSONPathEntry struct {
	// Key is the JSONPath as written in the lock.
	Key string
	// Path is the compiled query (root `$` implied when absent).
	Path *jsonpath.Path
	// Expected is the decoded expected value.
	Expected any
	// Regex is set when Expected is a /body/flags string.
	Regex *regexp.Regexp
	// Text is "key: <expected JSON>" for decision traces.
	Text string
}

// NormalizeJSONPath adds the root `$` jsonpath-plus implies: `env` ⇒
// `$.env`, `[0]` ⇒ `$[0]`, `.a` ⇒ `$.a`.
func NormalizeJSONPath(p string) string {
	switch {
	case strings.HasPrefix(p, "$"):
		return p
	case strings.HasPrefix(p, "[") || strings.HasPrefix(p, "."):
		return "$" + p
	default:
		return "$." + p
	}
}

// CompileJSONPath parses one RFC 9535 JSONPath expression (root implied).
func CompileJSONPath(p string) (*jsonpath.Path, error) {
	if strings.TrimSpace(p) == "" {
		return nil, fmt.Errorf("empty JSONPath")
	}
	jp, err := jsonpath.Parse(NormalizeJSONPath(p))
	if err != nil {
		return nil, fmt.Errorf("invalid JSONPath %q: %v", p, err)
	}
	return jp, nil
}

// ParseJSONPathFilter compiles a raw `match`/`not` object into entries
// sorted by key. Absent, null and {} give no entries. Errors name the
// offending key: a non-object filter, an invalid path, or an expected
// /regex/ that RE2 cannot run (lookaround, backreferences).
func ParseJSONPathFilter(raw json.RawMessage) ([]JSONPathEntry, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("must be an object of JSONPath → expected value")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []JSONPathEntry
	for _, k := range keys {
		jp, err := CompileJSONPath(k)
		if err != nil {
			return nil, err
		}
		var exp any
		if err := json.Unmarshal(m[k], &exp); err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		var cb bytes.Buffer
		text := string(m[k])
		if json.Compact(&cb, m[k]) == nil {
			text = cb.String()
		}
		e := JSONPathEntry{Key: k, Path: jp, Expected: exp, Text: k + ": " + text}
		if s, ok := exp.(string); ok {
			if sub := jsRegexLiteral.FindStringSubmatch(s); sub != nil {
				re, err := CompileRegex(sub[1], sub[2])
				if err != nil {
					return nil, fmt.Errorf("%s: %v", k, err)
				}
				e.Regex = re
			}
		}
		out = append(out, e)
	}
	return out, nil
}
