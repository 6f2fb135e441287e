package lockfile

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"kici.dev/kici/internal/cronspec"

	"kici.dev/kici/internal/runs/status"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/trigger/pattern"
)

// DefaultPREvents is what a `pr` trigger listens to when `events` is not
// given (KiCI packages/sdk/src/triggers: pr() defaults).
var DefaultPREvents = []string{"opened", "synchronize", "reopened", "closed"}

// triggerKinds lists the YAML trigger kinds and their allowed keys.
var triggerKinds = map[string][]string{
	"push":           {"branches", "tags", "paths", "repos", "commitMessage", "requires", "skipCi"},
	"pr":             {"events", "targetBranches", "sourceBranches", "paths", "repos", "commitMessage", "requires", "skipCi"},
	"tag":            {"patterns", "repos"},
	"comment":        {"actions", "on", "bodyMatch", "repos"},
	"review":         {"actions", "states", "repos"},
	"review_comment": {"actions", "repos"},
	"release":        {"actions", "repos"},
	"star":           {"actions", "repos"},
	"watch":          {"actions", "repos"},
	"dispatch":       {"types", "inputs", "repos"},
	"create":         {"refTypes", "patterns", "repos"},
	"delete":         {"refTypes", "patterns", "repos"},
	"status":         {"contexts", "states", "repos"},
	"workflow_run":   {"actions", "workflows", "conclusions", "repos"},
	"fork":           {"repos"},
	"webhook":        {"events", "actions", "repos"},
	"schedule":       {"cron", "timezone", "description", "inputs"},
	// internal and generic events (KiCI kiciEvent, genericWebhook,
	// workflowComplete, jobComplete, lifecycle)
	"kici_event":        {"name", "match", "not", "source"},
	"generic_webhook":   {"source", "events", "match", "not"},
	"workflow_complete": {"name", "status", "source"},
	"job_complete":      {"workflow", "job", "status", "source"},
	"lifecycle":         {"events", "sources", "description"},
}

// completeStatuses are the statuses workflow_complete / job_complete
// triggers may filter on (job_complete also allows skipped).
var completeStatuses = map[string][]string{
	"workflow_complete": status.Strings(status.TerminalRuns()),
	"job_complete":      status.Strings([]status.Job{status.JobSuccess, status.JobFailed, status.JobCancelled, status.JobSkipped}),
}

// lifecycleEvents are the lifecycle trigger's event names.
var lifecycleEvents = []string{"workflow_complete", "job_complete", "job_failed", "registration_updated"}

func triggerKindNames() string {
	names := make([]string, 0, len(triggerKinds))
	for k := range triggerKinds {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// triggers decodes `on:` in map form ({push: {...}, pr: null}) or list form
// ([push, {pr: {...}}]).
func (f *yfile) triggers(n ast.Node) []Trigger {
	out := []Trigger{}
	r := f.resolve(n)
	if isNull(r) {
		return out
	}
	if seq, ok := r.(*ast.SequenceNode); ok {
		for _, it := range seq.Values {
			if s, ok := f.scalar(it); ok {
				if ts, ok := f.trigger(s, it, nil); ok {
					out = append(out, ts...)
				}
				continue
			}
			entries, ok := f.mapping(it, "a trigger")
			if !ok {
				continue
			}
			if len(entries) != 1 {
				f.errorf(it, "a trigger list entry must have exactly one key (the trigger kind), got %d", len(entries))
				continue
			}
			if ts, ok := f.trigger(entries[0].key, entries[0].knode, entries[0].val); ok {
				out = append(out, ts...)
			}
		}
		return out
	}
	if s, ok := f.scalar(r); ok {
		if ts, ok := f.trigger(s, n, nil); ok {
			out = append(out, ts...)
		}
		return out
	}
	entries, ok := f.mapping(n, "`on`")
	if !ok {
		return out
	}
	for _, e := range entries {
		if ts, ok := f.trigger(e.key, e.knode, e.val); ok {
			out = append(out, ts...)
		}
	}
	return out
}

// trigger decodes one trigger. A push trigger with `tags` yields two
// entries, the push and a tag trigger with those patterns (KiCI
// push({tags}); the tag entry carries no repos).
func (f *yfile) trigger(kind string, kindNode, n ast.Node) ([]Trigger, bool) {
	var tagPatterns []Pattern
	hasTags := false
	t, ok := f.trigger1(kind, kindNode, n, &tagPatterns, &hasTags)
	if !ok {
		return nil, false
	}
	out := []Trigger{t}
	if hasTags {
		out = append(out, Trigger{Type: "tag", Patterns: tagPatterns})
	}
	return out, true
}

func (f *yfile) trigger1(kind string, kindNode, n ast.Node, tagPatterns *[]Pattern, hasTags *bool) (Trigger, bool) {
	if kind == "pull_request" {
		kind = "pr"
	}
	allowed, known := triggerKinds[kind]
	if !known {
		f.errorf(kindNode, "unknown trigger kind %q (supported: %s)", kind, triggerKindNames())
		return Trigger{}, false
	}
	t := Trigger{Type: kind}
	if kind == "pr" {
		t.Events = slices.Clone(DefaultPREvents)
	}
	if kind == "schedule" {
		t.Timezone = "UTC"
	}
	var entries []kv
	if !isNull(f.resolve(n)) {
		var ok bool
		entries, ok = f.mapping(n, "trigger "+kind)
		if !ok {
			return t, false
		}
	}
	before := len(f.errs)
	f.strict(entries, "trigger "+kind, allowed...)
	hasEvents := false
	for _, e := range entries {
		hasEvents = f.triggerField(kind, &t, e, tagPatterns, hasTags) || hasEvents
	}
	f.checkTrigger(kind, kindNode, &t, hasEvents)
	return t, len(f.errs) == before
}

// jsonValue converts a YAML value (a match/not object) to compact JSON.
func (f *yfile) jsonValue(n ast.Node, what string) json.RawMessage {
	r := f.resolve(n)
	if isNull(r) {
		return nil
	}
	if _, ok := r.(*ast.MappingNode); !ok {
		f.errorf(n, "%s must be a mapping of JSONPath → expected value", what)
		return nil
	}
	var v any
	if err := yaml.NodeToValue(r, &v); err != nil {
		f.errorf(n, "%s: %v", what, err)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		f.errorf(n, "%s: %v", what, err)
		return nil
	}
	return b
}

// inputTypes are the dispatch/schedule input types (KiCI InputDescriptor).
var inputTypes = []InputType{InputString, InputNumber, InputInteger, InputBoolean, InputEnum}

// joinInputTypes lists ts separated by ", ".
func joinInputTypes(ts []InputType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// inputs decodes typed dispatch inputs: name → {type, optional, nullable,
// default, values, min, max, pattern, description}, stored as KiCI
// InputDescriptor JSON.
func (f *yfile) inputs(n ast.Node, what string) json.RawMessage {
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	out := map[string]InputDescriptor{}
	for _, e := range entries {
		iw := what + "." + e.key
		fields, ok := f.mapping(e.val, iw)
		if !ok {
			continue
		}
		f.strict(fields, iw, "type", "optional", "nullable", "default", "values", "min", "max", "pattern", "description")
		var d InputDescriptor
		for _, fe := range fields {
			fw := iw + "." + fe.key
			switch fe.key {
			case "type":
				t, _ := f.nonEmptyStr(fe.val, fw)
				d.Type = InputType(t)
			case "optional":
				d.Optional, _ = f.boolean(fe.val, fw)
			case "nullable":
				d.Nullable, _ = f.boolean(fe.val, fw)
			case "default":
				var v any
				if err := yaml.NodeToValue(f.resolve(fe.val), &v); err != nil {
					f.errorf(fe.val, "%s: %v", fw, err)
				}
				d.Default = v
				d.HasDefault = true
			case "values":
				d.Values, _ = f.strList(fe.val, fw)
			case "min", "max":
				s, ok := f.scalar(fe.val)
				var x float64
				if _, err := fmt.Sscan(s, &x); !ok || err != nil {
					f.errorf(fe.val, "%s must be a number", fw)
					continue
				}
				if fe.key == "min" {
					d.Min = &x
				} else {
					d.Max = &x
				}
			case "pattern":
				d.Pattern, _ = f.nonEmptyStr(fe.val, fw)
				if _, err := pattern.CompileRegex(d.Pattern, ""); err != nil {
					f.errorf(fe.val, "%s: %v", fw, err)
				}
			case "description":
				d.Description, _ = f.str(fe.val, fw)
			}
		}
		if d.Type == "choice" { // the GitHub Actions name of enum
			d.Type = InputEnum
		}
		if !slices.Contains(inputTypes, d.Type) {
			f.errorf(e.val, "%s: type must be one of %s", iw, joinInputTypes(inputTypes))
			continue
		}
		if d.Type == InputEnum && len(d.Values) == 0 {
			f.errorf(e.val, "%s: an enum needs `values`", iw)
			continue
		}
		if d.HasDefault {
			if _, err := d.Coerce(d.Default); err != nil {
				f.errorf(e.val, "%s: default: %v", iw, err)
				continue
			}
		}
		out[e.key] = d
	}
	b, err := json.Marshal(out)
	if err != nil {
		f.errorf(n, "%s: %v", what, err)
		return nil
	}
	return b
}

// patterns decodes a list of branch/tag/ref/repo patterns: strings are globs,
// {regex, flags} mappings are regexes.
func (f *yfile) patterns(n ast.Node, what string) []Pattern {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil
	}
	var out []Pattern
	for _, it := range items {
		if s, ok := f.scalar(it); ok {
			if s == "" || s == "!" {
				f.errorf(it, "%s: empty pattern", what)
				continue
			}
			if !f.checkGlob(it, s, what) {
				continue
			}
			out = append(out, Pattern{Type: PatternGlob, Pattern: s})
			continue
		}
		p := Pattern{Type: PatternRegex}
		if p.Pattern, p.Flags, ok = f.regexMapping(it, what+" entry"); !ok {
			continue
		}
		if !f.checkRegex(it, p.Pattern, p.Flags, what) {
			continue
		}
		if err := checkTriggerRegex(p); err != nil {
			f.errorf(it, "%s: %v", what, err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// paths decodes a list of path globs ("!" prefix = exclusion).
func (f *yfile) paths(n ast.Node, what string) []string {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil
	}
	var out []string
	for _, it := range items {
		s, ok := f.nonEmptyStr(it, what+" entries")
		if !ok {
			continue
		}
		if s == "!" {
			f.errorf(it, "%s: invalid glob %q", what, s)
			continue
		}
		if !f.checkGlob(it, s, what) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// triggerField reads one key of a trigger's mapping into t (the keys a kind
// allows were checked before); it reports whether the key was `events`.
func (f *yfile) triggerField(kind string, t *Trigger, e kv, tagPatterns *[]Pattern, hasTags *bool) (events bool) {
	what := kind + "." + e.key
	switch e.key {
	case "branches":
		t.Branches = f.patterns(e.val, what)
	case "targetBranches":
		t.TargetBranches = f.patterns(e.val, what)
	case "sourceBranches":
		t.SourceBranches = f.patterns(e.val, what)
	case "patterns":
		t.Patterns = f.patterns(e.val, what)
	case "tags":
		*tagPatterns = f.patterns(e.val, what)
		*hasTags = true
	case "repos":
		t.Repos = f.patterns(e.val, what)
	case "paths":
		t.Paths = f.paths(e.val, what)
	case "events":
		t.Events, _ = f.strList(e.val, what)
		events = true
	case "actions":
		t.Actions, _ = f.strList(e.val, what)
	case "states":
		t.States, _ = f.strList(e.val, what)
	case "types":
		t.Types, _ = f.strList(e.val, what)
	case "refTypes":
		t.RefTypes, _ = f.strList(e.val, what)
		for _, rt := range t.RefTypes {
			if rt != "branch" && rt != "tag" {
				f.errorf(e.val, "%s: %q is not a ref type (branch or tag)", what, rt)
			}
		}
	case "contexts":
		t.Contexts, _ = f.strList(e.val, what)
		for _, c := range t.Contexts {
			if _, err := pattern.CompileGlob(c); err != nil {
				f.errorf(e.val, "%s: %v", what, err)
			}
		}
	case "workflows":
		t.Workflows, _ = f.strList(e.val, what)
	case "conclusions":
		t.Conclusions, _ = f.strList(e.val, what)
	case "on":
		if s, ok := f.str(e.val, what); ok {
			if s != "issue" && s != "pr" {
				f.errorf(e.val, "%s must be issue or pr, got %q", what, s)
			}
			t.CommentOn = s
		}
	case "bodyMatch":
		if ps := f.patterns(e.val, what); len(ps) == 1 {
			t.BodyMatch = &ps[0]
		} else if len(ps) > 1 {
			f.errorf(e.val, "%s takes one pattern", what)
		}
	case "cron":
		if s, ok := f.nonEmptyStr(e.val, what); ok {
			if err := cronspec.Check(s); err != nil {
				f.errorf(e.val, "%s: %q is not a cron expression (5 fields: minute hour day-of-month month day-of-week, or @hourly/@daily/…): %v", what, s, err)
			}
			t.CronExpression = s
		}
	case "timezone":
		if s, ok := f.nonEmptyStr(e.val, what); ok {
			if _, err := time.LoadLocation(s); err != nil {
				f.errorf(e.val, "%s: unknown time zone %q", what, s)
			}
			t.Timezone = s
		}
	case "description":
		t.Description, _ = f.str(e.val, what)
	case "name":
		if kind == "kici_event" {
			t.EventName, _ = f.nonEmptyStr(e.val, what)
		} else {
			t.Name, _ = f.nonEmptyStr(e.val, what)
		}
	case "source":
		t.CommentOn, _ = f.nonEmptyStr(e.val, what)
	case "workflow":
		t.Workflow, _ = f.nonEmptyStr(e.val, what)
	case "job":
		t.Job, _ = f.nonEmptyStr(e.val, what)
	case "status":
		t.Status, _ = f.strList(e.val, what)
		for _, st := range t.Status {
			if !slices.Contains(completeStatuses[kind], st) {
				f.errorf(e.val, "%s: %q is not one of %s", what, st, strings.Join(completeStatuses[kind], ", "))
			}
		}
	case "sources":
		t.Sources, _ = f.strList(e.val, what)
	case "match", "not":
		raw := f.jsonValue(e.val, what)
		if raw != nil {
			if _, err := pattern.ParseJSONPathFilter(raw); err != nil {
				f.errorf(e.val, "%s: %v", what, err)
			}
		}
		if e.key == "match" {
			t.Match = raw
		} else {
			t.Not = raw
		}
	case "inputs":
		t.Inputs = f.inputs(e.val, what)
	case "commitMessage":
		t.CommitMessage = f.commitMessage(e.val, what)
	case "requires":
		t.Requires = f.requires(e.val, what)
	case "skipCi":
		if b, ok := f.boolean(e.val, what); ok && !b {
			t.SkipCI = &b
		}
	}
	return events
}

// checkTrigger applies the rules of a trigger kind that span its keys
// (a schedule needs cron, a webhook events, …) once all are read.
func (f *yfile) checkTrigger(kind string, kindNode ast.Node, t *Trigger, hasEvents bool) {
	if kind == "lifecycle" {
		if len(t.Events) == 0 {
			f.errorf(kindNode, "trigger lifecycle needs a non-empty `events` list")
		}
		for _, le := range t.Events {
			if !slices.Contains(lifecycleEvents, le) {
				f.errorf(kindNode, "lifecycle.events: %q is not one of %s", le, strings.Join(lifecycleEvents, ", "))
			}
		}
	}
	if kind == "schedule" && len(t.Inputs) > 0 {
		var ds map[string]InputDescriptor
		if json.Unmarshal(t.Inputs, &ds) == nil {
			for name, d := range ds {
				if !d.HasDefault && !d.Optional {
					f.errorf(kindNode, "schedule.inputs.%s needs a default or optional: true (nobody supplies inputs to a schedule)", name)
				}
			}
		}
	}
	if kind == "kici_event" && t.EventName == "" {
		f.errorf(kindNode, "trigger kici_event needs `name` (the emitted event name)")
	}
	if kind == "generic_webhook" && t.CommentOn == "" {
		f.errorf(kindNode, "trigger generic_webhook needs `source` (the generic source name)")
	}
	if kind == "webhook" && len(t.Events) == 0 {
		f.errorf(kindNode, "trigger webhook needs a non-empty `events` list")
	}
	if kind == "pr" && hasEvents && len(t.Events) == 0 {
		t.Events = nil // explicit [] = any action
	}
	if kind == "schedule" && t.CronExpression == "" {
		f.errorf(kindNode, "trigger schedule needs `cron`")
	}
}
