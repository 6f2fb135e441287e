package lockfile

import (
	"bytes"
	"encoding/json"
	"fmt"

	"kici.dev/kici/internal/trigger/pattern"
)

// MaxLockSize is the largest lock document Parse accepts (5 MiB).
const MaxLockSize = 5 << 20

// Parse decodes and validates a lock document, in KiCI's order (lockfile-validate.ts):
// size and JSON syntax, schemaVersion == SchemaVersion, label matcher
// shapes ({kind:"exact",value} or {kind:"regex",source,flags}) in runsOn,
// excludeLabels and runsOnAll of static jobs, then the ReDoS guard on regex
// label matchers. It also checks trigger patterns' shape and compiles every
// regex so matching never meets an invalid one. Unknown fields are ignored.
// Errors are *ParseError naming the workflow, job and field.
func Parse(data []byte) (*LockFile, error) {
	if len(data) > MaxLockSize {
		return nil, &ParseError{Msg: fmt.Sprintf("%d bytes exceeds the %d byte limit", len(data), MaxLockSize)}
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, &ParseError{Msg: "no content"}
	}
	var head struct {
		SchemaVersion json.RawMessage `json:"schemaVersion"`
		Workflows     []struct {
			Name string `json:"name"`
			Jobs []struct {
				Type          JobType         `json:"_type"`
				Name          string          `json:"name"`
				RunsOn        json.RawMessage `json:"runsOn"`
				ExcludeLabels json.RawMessage `json:"excludeLabels"`
				RunsOnAll     *struct {
					Include []json.RawMessage `json:"include"`
					Exclude json.RawMessage   `json:"exclude"`
				} `json:"runsOnAll"`
			} `json:"jobs"`
		} `json:"workflows"`
	}
	if data[0] != '{' {
		return nil, &ParseError{Msg: "not a JSON object"}
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, &ParseError{Msg: "JSON parse failure: " + err.Error()}
	}
	var version int
	if len(head.SchemaVersion) == 0 || json.Unmarshal(head.SchemaVersion, &version) != nil {
		return nil, &ParseError{Msg: "missing or non-numeric schemaVersion"}
	}
	if version != SchemaVersion {
		return nil, &ParseError{Msg: fmt.Sprintf("schema version %d is not supported (this reader speaks version %d): recompile the lock with `kici compile`", version, SchemaVersion)}
	}
	for _, wf := range head.Workflows {
		for ji, j := range wf.Jobs {
			if j.Type != JobStatic && j.Type != "" {
				continue
			}
			name := j.Name
			if name == "" {
				name = fmt.Sprintf("#%d", ji)
			}
			ctx := fmt.Sprintf("workflow %q job %q", wf.Name, name)
			if err := checkMatchers(ctx+" runsOn", j.RunsOn); err != nil {
				return nil, err
			}
			if err := checkMatchers(ctx+" excludeLabels", j.ExcludeLabels); err != nil {
				return nil, err
			}
			if j.RunsOnAll != nil {
				for gi, g := range j.RunsOnAll.Include {
					if err := checkMatchers(fmt.Sprintf("%s runsOnAll.include[%d]", ctx, gi), g); err != nil {
						return nil, err
					}
				}
				if err := checkMatchers(ctx+" runsOnAll.exclude", j.RunsOnAll.Exclude); err != nil {
					return nil, err
				}
			}
		}
	}
	var lf LockFile
	if err := json.Unmarshal(data, &lf); err != nil {
		return nil, &ParseError{Msg: "JSON parse failure: " + err.Error()}
	}
	for _, wf := range lf.Workflows {
		for ti, t := range wf.Triggers {
			ctx := fmt.Sprintf("workflow %q trigger %d (%s)", wf.Name, ti+1, t.Type)
			if t.Type == "" {
				return nil, &ParseError{Context: ctx, Msg: "missing _type"}
			}
			for field, list := range map[string][]Pattern{
				"branches": t.Branches, "targetBranches": t.TargetBranches, "sourceBranches": t.SourceBranches,
				"patterns": t.Patterns, "repos": t.Repos,
			} {
				for _, p := range list {
					if err := checkPattern(p); err != nil {
						return nil, &ParseError{Context: ctx + " " + field, Msg: err.Error()}
					}
				}
			}
			if t.BodyMatch != nil {
				if err := checkPattern(*t.BodyMatch); err != nil {
					return nil, &ParseError{Context: ctx + " bodyMatch", Msg: err.Error()}
				}
			}
			if err := checkTriggerFilters(t); err != nil {
				return nil, &ParseError{Context: ctx, Msg: err.Error()}
			}
		}
		for _, j := range wf.Jobs {
			if j.Type != JobStatic {
				continue
			}
			for ni, n := range j.Needs {
				if n.Name == "" && n.Group == "" {
					return nil, &ParseError{Context: fmt.Sprintf("workflow %q job %q needs[%d]", wf.Name, j.Name, ni), Msg: "need has neither name nor group"}
				}
				if len(n.RunOn) == 0 {
					return nil, &ParseError{Context: fmt.Sprintf("workflow %q job %q needs[%d]", wf.Name, j.Name, ni), Msg: "runOn must not be empty"}
				}
			}
		}
	}
	if err := validateSemantics(&lf); err != nil {
		return nil, err
	}
	return &lf, nil
}

// checkTriggerFilters validates what the matcher would otherwise meet only
// at match time: JSONPath match/not filters (paths and /regex/ values),
// status context globs, and the fields a kind cannot do without.
func checkTriggerFilters(t Trigger) error {
	for field, raw := range map[string]json.RawMessage{"match": t.Match, "not": t.Not} {
		if _, err := pattern.ParseJSONPathFilter(raw); err != nil {
			return fmt.Errorf("%s: %v", field, err)
		}
	}
	for _, c := range t.Contexts {
		if _, err := pattern.CompileGlob(c); err != nil {
			return fmt.Errorf("contexts: %v", err)
		}
	}
	switch t.Type {
	case "kici_event":
		if t.EventName == "" {
			return fmt.Errorf("kici_event trigger needs eventName")
		}
	case "generic_webhook":
		if t.CommentOn == "" {
			return fmt.Errorf("generic_webhook trigger needs source")
		}
	case "webhook":
		if len(t.Events) == 0 {
			return fmt.Errorf("webhook trigger needs a non-empty events list")
		}
	}
	return nil
}

// checkPattern validates a trigger pattern's shape and compiles it.
func checkPattern(p Pattern) error {
	switch p.Type {
	case PatternGlob:
		_, err := pattern.CompileGlob(p.Pattern)
		return err
	case PatternRegex:
		_, err := pattern.CompileRegex(p.Pattern, p.Flags)
		return err
	}
	return fmt.Errorf("pattern %q has type %q; want glob or regex", p.Pattern, p.Type)
}

// checkMatchers validates a list of label matchers (absent or null is fine).
func checkMatchers(ctx string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return &ParseError{Context: ctx, Msg: "must be a list of label matchers"}
	}
	for i, e := range elems {
		if err := CheckLabelMatcherJSON(e); err != nil {
			return &ParseError{Context: fmt.Sprintf("%s[%d]", ctx, i), Msg: err.Error()}
		}
	}
	return nil
}

// CheckLabelMatcherJSON validates one raw label matcher element: it must be
// {kind:"exact", value} or {kind:"regex", source, flags}, and a regex must
// compile under RE2 and pass the ReDoS guard.
func CheckLabelMatcherJSON(e json.RawMessage) error {
	bad := func() error {
		return fmt.Errorf("invalid label matcher %s: want {\"kind\":\"exact\",\"value\":\"...\"} or {\"kind\":\"regex\",\"source\":\"...\",\"flags\":\"...\"} (the lock may be stale: recompile with `kici compile`)", compactOrRaw(e))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(e, &m); err != nil {
		return bad()
	}
	var kind MatcherKind
	if json.Unmarshal(m["kind"], &kind) != nil {
		return bad()
	}
	switch kind {
	case MatcherExact:
		var v string
		if json.Unmarshal(m["value"], &v) != nil || v == "" {
			return bad()
		}
		return nil
	case MatcherRegex:
		var src, flags string
		if json.Unmarshal(m["source"], &src) != nil {
			return bad()
		}
		if f, ok := m["flags"]; ok && json.Unmarshal(f, &flags) != nil {
			return bad()
		}
		return pattern.CheckSafeRegex(src, flags)
	}
	return bad()
}

func compactOrRaw(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		return buf.String()
	}
	return string(b)
}
