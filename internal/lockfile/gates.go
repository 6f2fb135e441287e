package lockfile

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/trigger/pattern"
)

// Trigger gates (KiCI 0.5): conditions on the commit message and on file
// contents at the event's commit, evaluated after a push or pr trigger's
// own checks. See docs/workflows.md "Trigger gates".

// MaxGatePatternLen bounds the source length of every regex a gate holds,
// in bytes: together with pattern.CheckSafeRegex it is kici's "checked for
// catastrophic backtracking" rule (see CheckGateRegex).
const MaxGatePatternLen = 512

// MaxRequires bounds the `requires` entries of one trigger: each one is a
// file read at the event's commit.
const MaxRequires = 16

// CommitMessageFilter is a trigger's `commitMessage` gate (KiCI 0.5): every
// listed condition must hold for the trigger to fire. Contains and
// NotContains are plain substrings; Matches and NotMatches are regexes
// (JavaScript source, evaluated with Go's RE2).
type CommitMessageFilter struct {
	Contains    []string  `json:"contains,omitempty"`
	NotContains []string  `json:"notContains,omitempty"`
	Matches     []Pattern `json:"matches,omitempty"`
	NotMatches  []Pattern `json:"notMatches,omitempty"`
}

// RequireFormat says how a `requires` file is read.
type RequireFormat string

// The `requires` file formats. An empty format is inferred from the file
// name by InferFormat.
const (
	RequireJSON RequireFormat = "json"
	RequireYAML RequireFormat = "yaml"
	RequireText RequireFormat = "text"
)

// Requirement is one `requires` entry (KiCI 0.5 content filter): the file
// at the event's commit must exist and, for json/yaml, its document must
// satisfy Match (JSONPath → expected value, the semantics of kici_event's
// `match`); for text, contain Contains and match Matches. A missing or
// unparsable file fails the gate (KiCI drops the trigger instead; see
// docs/kici-compatibility.md#lock-file).
type Requirement struct {
	File     string          `json:"file"`
	Format   RequireFormat   `json:"format"`
	Match    json.RawMessage `json:"match,omitempty"`
	Contains string          `json:"contains,omitempty"`
	Matches  *Pattern        `json:"matches,omitempty"`
}

// InferFormat returns the format a `requires` file is read in when none is
// given: json for *.json, yaml for *.yaml/*.yml, text otherwise.
func InferFormat(file string) RequireFormat {
	switch strings.ToLower(path.Ext(file)) {
	case ".json":
		return RequireJSON
	case ".yaml", ".yml":
		return RequireYAML
	}
	return RequireText
}

// CheckGateRegex is what "checked for catastrophic backtracking" means for
// kici. Go's regexp is RE2: matching is linear in the input, so no pattern
// can backtrack catastrophically here. The check still refuses what would
// be dangerous in a backtracking engine, so that a workflow stays safe to
// port and the cost of compiling a pattern stays small: the source must be
// at most MaxGatePatternLen bytes, compile under RE2, have star height at
// most 1 (no nested quantifiers such as (a+)+) and at most
// pattern.MaxRegexRepetitions quantifiers (KiCI's safe-regex rule).
func CheckGateRegex(p Pattern) error {
	if len(p.Pattern) > MaxGatePatternLen {
		return fmt.Errorf("regex is %d bytes long; the limit is %d", len(p.Pattern), MaxGatePatternLen)
	}
	return pattern.CheckSafeRegex(p.Pattern, p.Flags)
}

// gatePattern decodes a regex written as a string or as {regex, flags}.
func (f *yfile) gatePattern(n ast.Node, what string) (Pattern, bool) {
	p := Pattern{Type: PatternRegex}
	if s, ok := f.scalar(n); ok {
		if s == "" {
			f.errorf(n, "%s: empty regex", what)
			return p, false
		}
		p.Pattern = s
	} else if p.Pattern, p.Flags, ok = f.regexMapping(n, what); !ok {
		return p, false
	}
	if err := CheckGateRegex(p); err != nil {
		f.errorf(n, "%s: %v", what, err)
		return p, false
	}
	return p, true
}

// gatePatterns decodes one regex or a list of them.
func (f *yfile) gatePatterns(n ast.Node, what string) []Pattern {
	if _, ok := f.resolve(n).(*ast.MappingNode); ok {
		if p, ok := f.gatePattern(n, what); ok {
			return []Pattern{p}
		}
		return nil
	}
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil
	}
	var out []Pattern
	for _, it := range items {
		if p, ok := f.gatePattern(it, what); ok {
			out = append(out, p)
		}
	}
	return out
}

// commitMessage decodes a trigger's `commitMessage` mapping.
func (f *yfile) commitMessage(n ast.Node, what string) *CommitMessageFilter {
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	f.strict(entries, what, "contains", "notContains", "matches", "notMatches")
	c := &CommitMessageFilter{}
	for _, e := range entries {
		w := what + "." + e.key
		switch e.key {
		case "contains":
			c.Contains, _ = f.strList(e.val, w)
		case "notContains":
			c.NotContains, _ = f.strList(e.val, w)
		case "matches":
			c.Matches = f.gatePatterns(e.val, w)
		case "notMatches":
			c.NotMatches = f.gatePatterns(e.val, w)
		}
	}
	for _, s := range slices.Concat(c.Contains, c.NotContains) {
		if s == "" {
			f.errorf(n, "%s: an empty substring matches every message", what)
		}
	}
	if len(c.Contains)+len(c.NotContains)+len(c.Matches)+len(c.NotMatches) == 0 {
		f.errorf(n, "%s needs at least one of contains, notContains, matches, notMatches", what)
	}
	return c
}

// requires decodes a trigger's `requires` list.
func (f *yfile) requires(n ast.Node, what string) []Requirement {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil
	}
	if len(items) > MaxRequires {
		f.errorf(n, "%s: %d entries exceed the limit of %d", what, len(items), MaxRequires)
		return nil
	}
	var out []Requirement
	for i, it := range items {
		w := fmt.Sprintf("%s[%d]", what, i)
		var r Requirement
		if s, ok := f.scalar(it); ok {
			r.File = s
		} else {
			entries, ok := f.mapping(it, w)
			if !ok {
				continue
			}
			f.strict(entries, w, "file", "format", "match", "contains", "matches")
			for _, e := range entries {
				switch e.key {
				case "file":
					r.File, _ = f.nonEmptyStr(e.val, w+".file")
				case "format":
					s, _ := f.nonEmptyStr(e.val, w+".format")
					r.Format = RequireFormat(s)
				case "match":
					r.Match = f.jsonValue(e.val, w+".match")
					if r.Match != nil {
						if _, err := pattern.ParseJSONPathFilter(r.Match); err != nil {
							f.errorf(e.val, "%s.match: %v", w, err)
						}
					}
				case "contains":
					r.Contains, _ = f.nonEmptyStr(e.val, w+".contains")
				case "matches":
					if p, ok := f.gatePattern(e.val, w+".matches"); ok {
						r.Matches = &p
					}
				}
			}
		}
		if msg := checkRequirePath(r.File); msg != "" {
			f.errorf(it, "%s.file: %s", w, msg)
			continue
		}
		if r.Format == "" {
			r.Format = InferFormat(r.File)
		}
		if msg := checkRequirement(&r); msg != "" {
			f.errorf(it, "%s: %s", w, msg)
			continue
		}
		out = append(out, r)
	}
	return out
}

// checkRequirePath refuses paths that could leave the repository.
func checkRequirePath(p string) string {
	switch {
	case p == "":
		return "a requirement needs `file` (a path relative to the repository root)"
	case strings.HasPrefix(p, "/"), strings.Contains(p, "\\"), strings.ContainsRune(p, 0):
		return fmt.Sprintf("%q must be a relative path with / separators", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return fmt.Sprintf("%q must be a clean relative path (no empty, . or .. segments)", p)
		}
	}
	return ""
}

// checkRequirement checks the fields of r that depend on its format.
func checkRequirement(r *Requirement) string {
	switch r.Format {
	case RequireJSON, RequireYAML:
		if r.Contains != "" || r.Matches != nil {
			return fmt.Sprintf("contains/matches apply to text files; a %s file is checked with `match` (JSONPath → value), or set format: text", r.Format)
		}
	case RequireText:
		if r.Match != nil {
			return "`match` (JSONPath) needs format json or yaml"
		}
	default:
		return fmt.Sprintf("format %q is not json, yaml or text", r.Format)
	}
	return ""
}

// validateGates re-checks the gates of a loaded lock (lock registration):
// a hand-edited lock gets the same pattern and path rules as the compiler.
func validateGates(wf *Workflow) error {
	for i, t := range wf.Triggers {
		ctx := fmt.Sprintf("workflow %q trigger %d", wf.Name, i)
		pats := slices.Concat(t.Branches, t.TargetBranches, t.SourceBranches, t.Patterns, t.Repos)
		if t.BodyMatch != nil {
			pats = append(pats, *t.BodyMatch)
		}
		for _, p := range pats {
			if err := checkTriggerRegex(p); err != nil {
				return &ParseError{Context: ctx, Msg: err.Error()}
			}
		}
		if c := t.CommitMessage; c != nil {
			for _, p := range append(append([]Pattern{}, c.Matches...), c.NotMatches...) {
				if err := CheckGateRegex(p); err != nil {
					return &ParseError{Context: ctx + " commitMessage", Msg: err.Error()}
				}
			}
		}
		if len(t.Requires) > MaxRequires {
			return &ParseError{Context: ctx + " requires", Msg: fmt.Sprintf("%d entries exceed the limit of %d", len(t.Requires), MaxRequires)}
		}
		for j := range t.Requires {
			r := &t.Requires[j]
			rctx := fmt.Sprintf("%s requires[%d]", ctx, j)
			if msg := checkRequirePath(r.File); msg != "" {
				return &ParseError{Context: rctx, Msg: msg}
			}
			if msg := checkRequirement(r); msg != "" {
				return &ParseError{Context: rctx, Msg: msg}
			}
			if r.Matches != nil {
				if err := CheckGateRegex(*r.Matches); err != nil {
					return &ParseError{Context: rctx + " matches", Msg: err.Error()}
				}
			}
			if _, err := pattern.ParseJSONPathFilter(r.Match); err != nil {
				return &ParseError{Context: rctx + " match", Msg: err.Error()}
			}
		}
	}
	return nil
}

// checkTriggerRegex applies CheckGateRegex to a regex branch pattern.
func checkTriggerRegex(p Pattern) error {
	if p.Type != PatternRegex {
		return nil
	}
	return CheckGateRegex(Pattern{Pattern: strings.TrimPrefix(p.Pattern, "!"), Flags: p.Flags})
}
