package lockfile

import (
	"encoding/json"
	"fmt"
	"kici.dev/kici/internal/execution/status"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/robfig/cron/v3"

	"kici.dev/kici/internal/trigger/pattern"
)

// DefaultPREvents is what a `pr` trigger listens to when `events` is not
// given (KiCI packages/sdk/src/triggers: pr() defaults).
var DefaultPREvents = []string{"opened", "synchronize", "reopened", "closed"}

// whenKeywords maps a YAML `needs[].when` keyword to its runOn set (KiCI
// resolveWhenToRunOn).
var whenKeywords = map[string][]status.Job{
	"on-success": {status.JobSuccess},
	"always":     status.TerminalJobs(),
	"on-skip":    {status.JobSuccess, status.JobSkipped},
	"on-failure": {status.JobFailed, status.JobTimedOutStale},
}

// CompileDir compiles every `<root>/.kici/workflows/*.yaml` (and *.yml)
// file, sorted by file name, into a lock file, and returns it together with
// its encoding (see Encode). Workflow problems are returned as CompileErrors
// (each with File:Line:Column); I/O problems as plain errors.
func CompileDir(root string) (*LockFile, []byte, error) {
	dir := filepath.Join(root, filepath.FromSlash(WorkflowDir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil, fmt.Errorf("no workflow directory %s (run `kici init` to create one)", WorkflowDir)
		}
		return nil, nil, fmt.Errorf("read %s: %w", WorkflowDir, err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no workflow files (*.yaml) in %s (run `kici init` to create one)", WorkflowDir)
	}
	files := make([]SourceFile, 0, len(names))
	for _, n := range names {
		path := filepath.Join(dir, n)
		if fi, err := os.Stat(path); err == nil && fi.Size() > MaxWorkflowFileSize {
			return nil, nil, CompileErrors{{File: WorkflowDir + "/" + n, Line: 1, Column: 1,
				Msg: fmt.Sprintf("file is %d bytes; a workflow file may be at most %d bytes", fi.Size(), MaxWorkflowFileSize)}}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read workflow: %w", err)
		}
		files = append(files, SourceFile{Path: WorkflowDir + "/" + n, Source: src})
	}
	lf, err := Compile(files)
	if err != nil {
		return nil, nil, err
	}
	data, err := Encode(lf)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > MaxLockSize {
		return nil, nil, fmt.Errorf("the compiled lock file would be %d bytes, over the %d byte limit the orchestrator accepts: split or shrink the workflows (YAML anchors repeated many times expand in the lock)", len(data), MaxLockSize)
	}
	return lf, data, nil
}

// MaxWorkflowFileSize caps one workflow YAML file: 1 MiB.
const MaxWorkflowFileSize = 1 << 20

// SourceFile is one workflow file given to Compile: its repo-relative path
// (forward slashes) and its raw bytes.
type SourceFile struct {
	Path   string
	Source []byte
}

// Compile compiles workflow files, in the given order, into a lock file with
// its contentHash set. It returns CompileErrors when any file is invalid,
// including duplicate workflow names across files.
func Compile(files []SourceFile) (*LockFile, error) {
	lf := &LockFile{
		SchemaVersion: SchemaVersion,
		Source:        SourceRef{File: WorkflowDir, Export: "#default"},
		Workflows:     []Workflow{},
	}
	var errs CompileErrors
	seen := map[string]string{}
	for _, sf := range files {
		wf, nameNode, ferrs := compileFile(sf)
		errs = append(errs, ferrs...)
		if wf == nil {
			continue
		}
		if prev, dup := seen[wf.Name]; dup {
			line, col := nodePos(nameNode)
			if nameNode == nil {
				line, col = 1, 1
			}
			errs = append(errs, &CompileError{File: sf.Path, Line: line, Column: col,
				Msg: fmt.Sprintf("duplicate workflow name %q (also defined in %s)", wf.Name, prev)})
			continue
		}
		seen[wf.Name] = sf.Path
		lf.Workflows = append(lf.Workflows, *wf)
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	if len(lf.Workflows) > 0 {
		lf.Source = lf.Workflows[0].Source
	}
	h, err := ContentHash(lf)
	if err != nil {
		return nil, err
	}
	lf.ContentHash = h
	return lf, nil
}

// compileFile compiles one workflow file. It returns the workflow (nil when
// the file has errors), the node of its `name` (for duplicate reports) and
// the errors.
func compileFile(sf SourceFile) (*Workflow, ast.Node, CompileErrors) {
	f := &yfile{path: sf.Path}
	body := f.parseYAML(sf.Source)
	if body == nil {
		return nil, nil, f.errs
	}
	entries, ok := f.mapping(body, "a workflow")
	if !ok {
		return nil, nil, f.errs
	}
	f.strict(entries, "workflow", "name", "description", "on", "timeout", "concurrency", "env", "jobs", "drift")
	base := filepath.Base(sf.Path)
	wf := &Workflow{
		Name:                 strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml"),
		Source:               SourceRef{File: sf.Path, Export: "#default"},
		ContentHash:          WorkflowContentHash(sf.Source),
		CompileSchemaVersion: CompileSchemaVersion,
		Triggers:             []Trigger{},
		Jobs:                 []Job{},
	}
	var nameNode, jobsNode ast.Node
	var env map[string]string
	for _, e := range entries {
		switch e.key {
		case "name":
			nameNode = e.val
			if s, ok := f.nonEmptyStr(e.val, "workflow name"); ok {
				wf.Name = s
			}
		case "description":
			if s, ok := f.str(e.val, "description"); ok {
				wf.Description = s
			}
		case "on":
			wf.Triggers = f.triggers(e.val)
		case "timeout":
			if ms, ok := f.duration(e.val, "workflow timeout"); ok {
				wf.Timeout = ms
			}
		case "concurrency":
			wf.Concurrency = f.concurrency(e.val)
		case "env":
			env = f.envMap(e.val, "workflow env")
		case "jobs":
			jobsNode = e.val
		case "drift":
			wf.Drift = f.drift(e.val)
		}
	}
	if nameNode == nil {
		nameNode = body
	}
	if jobsNode == nil {
		f.errorf(body, "workflow has no jobs (add a `jobs:` mapping)")
	} else {
		f.inputNames = inputNames(wf.Triggers)
		wf.Jobs = f.jobs(jobsNode, env)
	}
	if len(f.errs) > 0 {
		return nil, nameNode, f.errs
	}
	return wf, nameNode, nil
}

func (f *yfile) concurrency(n ast.Node) *Concurrency {
	if s, ok := f.scalar(n); ok {
		if strings.TrimSpace(s) == "" {
			f.errorf(n, "concurrency group must not be empty")
			return nil
		}
		return &Concurrency{HasGroup: true, Group: s}
	}
	entries, ok := f.mapping(n, "concurrency")
	if !ok {
		return nil
	}
	f.strict(entries, "concurrency", "group", "cancelInProgress", "max")
	c := &Concurrency{}
	for _, e := range entries {
		switch e.key {
		case "group":
			if s, ok := f.nonEmptyStr(e.val, "concurrency group"); ok {
				c.Group, c.HasGroup = s, true
			}
		case "cancelInProgress":
			if b, ok := f.boolean(e.val, "cancelInProgress"); ok {
				c.CancelInProgress = &b
			}
		case "max":
			if v, ok := f.intRange(e.val, "concurrency max", 1, 1000); ok {
				c.Max = v
			}
		}
	}
	return c
}

// triggerKinds lists the YAML trigger kinds and their allowed keys.
var triggerKinds = map[string][]string{
	"push":           {"branches", "tags", "paths", "repos"},
	"pr":             {"events", "targetBranches", "sourceBranches", "paths", "repos"},
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

// cronParser accepts what the scheduler fires: standard 5-field cron
// expressions and descriptors (@hourly, @daily, @every 5m, …).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

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
			hasEvents = true
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
				if _, err := cronParser.Parse(s); err != nil {
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
		}
	}
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
var inputTypes = []string{"string", "number", "integer", "boolean", "enum"}

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
				d.Type, _ = f.nonEmptyStr(fe.val, fw)
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
			d.Type = "enum"
		}
		if !slices.Contains(inputTypes, d.Type) {
			f.errorf(e.val, "%s: type must be one of %s", iw, strings.Join(inputTypes, ", "))
			continue
		}
		if d.Type == "enum" && len(d.Values) == 0 {
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
			out = append(out, Pattern{Type: "glob", Pattern: s})
			continue
		}
		entries, ok := f.mapping(it, what+" entries")
		if !ok {
			continue
		}
		f.strict(entries, what+" entry", "regex", "flags")
		p := Pattern{Type: "regex"}
		for _, e := range entries {
			switch e.key {
			case "regex":
				p.Pattern, _ = f.nonEmptyStr(e.val, what+" regex")
			case "flags":
				p.Flags, _ = f.str(e.val, what+" flags")
			}
		}
		if p.Pattern == "" {
			f.errorf(it, "%s: a regex entry needs `regex`", what)
			continue
		}
		if !f.checkRegex(it, p.Pattern, p.Flags, what) {
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

// jobNode keeps a job's positions for the graph checks.
type jobNode struct {
	name  string
	node  ast.Node
	needs []needRef
}

type needRef struct {
	name string
	node ast.Node
}

func (f *yfile) jobs(n ast.Node, wfEnv map[string]string) []Job {
	entries, ok := f.mapping(n, "jobs")
	if !ok {
		return []Job{}
	}
	if len(entries) == 0 {
		f.errorf(n, "workflow has no jobs")
	}
	jobs := []Job{}
	var nodes []jobNode
	index := map[string]int{}
	for _, e := range entries {
		if msg := checkJobName(e.key); msg != "" {
			f.errorf(e.knode, "job name %q %s", e.key, msg)
			continue
		}
		j, refs := f.job(e.key, e.knode, e.val, wfEnv)
		index[e.key] = len(jobs)
		jobs = append(jobs, j)
		nodes = append(nodes, jobNode{name: e.key, node: e.knode, needs: refs})
	}
	// needs: missing, self, cycles
	for _, jn := range nodes {
		for _, r := range jn.needs {
			if r.name == jn.name {
				f.errorf(r.node, "job %q needs itself", jn.name)
			} else if _, ok := index[r.name]; !ok {
				f.errorf(r.node, "job %q needs %q, which is not a job of this workflow", jn.name, r.name)
			}
		}
	}
	if cycle := findCycle(nodes, index); cycle != nil {
		jn := nodes[index[cycle[0]]]
		f.errorf(jn.node, "jobs form a dependency cycle: %s", strings.Join(cycle, " → "))
	}
	f.checkOutputRefs(jobs, nodes)
	if name, msg := checkDownloads(jobs); msg != "" {
		f.errorf(nodes[index[name]].node, "job %q %s", name, msg)
	}
	return jobs
}

func checkJobName(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "must not be empty"
	case strings.HasPrefix(s, "__"):
		return "must not start with __ (reserved for internal jobs)"
	case strings.ContainsAny(s, "(),\n\r\t"):
		return "must not contain parentheses, commas or control characters"
	}
	return ""
}

// findCycle returns the job names of one dependency cycle (first name
// repeated at the end), or nil.
func findCycle(nodes []jobNode, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(nodes))
	var stack []string
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, nodes[i].name)
		for _, r := range nodes[i].needs {
			k, ok := index[r.name]
			if !ok || k == i {
				continue
			}
			switch color[k] {
			case grey:
				start := slices.Index(stack, r.name)
				cycle = append(slices.Clone(stack[start:]), r.name)
				return true
			case white:
				if visit(k) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range nodes {
		if color[i] == white && visit(i) {
			return cycle
		}
	}
	return nil
}

func (f *yfile) job(name string, knode, n ast.Node, wfEnv map[string]string) (Job, []needRef) {
	j := Job{Type: "static", Name: name, RunsOn: []LabelMatcher{}, RunsOnPick: "deterministic", Needs: []Need{}, Steps: []Step{}}
	if len(wfEnv) > 0 {
		j.Env = make(map[string]string, len(wfEnv))
		for k, v := range wfEnv {
			j.Env[k] = v
		}
	}
	entries, ok := f.mapping(n, "job "+name)
	if !ok {
		return j, nil
	}
	what := "job " + name
	f.strict(entries, what, "description", "runsOn", "needs", "matrix", "env", "timeout", "gracePeriod", "checkout", "steps", "run", "secrets", "contexts",
		"cache", "artifacts", "download", "container", "services", "if", "outputs")
	f.inJob = true
	var refs []needRef
	var stepsNode, runNode, ifNode, outputsNode ast.Node
	for _, e := range entries {
		switch e.key {
		case "description":
			j.Description, _ = f.str(e.val, what+" description")
		case "runsOn":
			f.runsOn(&j, e.val, what+" runsOn")
		case "needs":
			j.Needs, refs = f.needs(e.val, what+" needs")
		case "matrix":
			f.matrix(&j, e.val, what+" matrix")
		case "env":
			for k, v := range f.envMap(e.val, what+" env") {
				if j.Env == nil {
					j.Env = map[string]string{}
				}
				j.Env[k] = v
			}
		case "timeout":
			j.Timeout, _ = f.duration(e.val, what+" timeout")
		case "secrets":
			j.Secrets = f.secretMap(e.val, what+" secrets")
		case "contexts":
			j.Contexts = f.contextList(e.val, what+" contexts")
		case "cache", "artifacts", "download", "container", "services":
			f.jobBlobs(&j, e.key, e.val, what)
		case "gracePeriod":
			if ms, ok := f.duration(e.val, what+" gracePeriod"); ok {
				j.GracePeriod = int((ms + 999) / 1000)
			}
		case "checkout":
			if b, ok := f.boolean(e.val, what+" checkout"); ok {
				j.Checkout = &b
			}
		case "steps":
			stepsNode = e.val
		case "run":
			runNode = e.val
		case "if":
			ifNode = e.val
		case "outputs":
			outputsNode = e.val
		}
	}
	f.beginJob(&j, refs)
	switch {
	case stepsNode != nil && runNode != nil:
		f.errorf(runNode, "%s: use either `steps` or the `run` shorthand, not both", what)
	case runNode != nil:
		if s, ok := f.nonEmptyStr(runNode, what+" run"); ok {
			line, col := nodePos(runNode)
			j.Steps = append(j.Steps, Step{Name: "step-1", Run: s, SourceLocation: &Location{File: f.path, Line: line, Column: col}})
		}
	case stepsNode != nil:
		j.Steps = f.steps(stepsNode, what)
	default:
		f.errorf(knode, "%s has no steps (add `steps:` or `run:`)", what)
	}
	f.endJob(&j, ifNode, outputsNode)
	return j, refs
}

func (f *yfile) runsOn(j *Job, n ast.Node, what string) {
	r := f.resolve(n)
	if _, isMap := r.(*ast.MappingNode); isMap || isMappingValue(r) {
		entries, ok := f.mapping(n, what)
		if !ok {
			return
		}
		f.strict(entries, what, "labels", "exclude", "pick")
		for _, e := range entries {
			switch e.key {
			case "labels":
				j.RunsOn = f.labelList(e.val, what+" labels")
			case "exclude":
				j.ExcludeLabels = f.labelList(e.val, what+" exclude")
			case "pick":
				if s, ok := f.str(e.val, what+" pick"); ok {
					if s != "deterministic" && s != "any" {
						f.errorf(e.val, "%s pick must be deterministic or any, got %q", what, s)
					}
					j.RunsOnPick = s
				}
			}
		}
		for _, in := range j.RunsOn {
			for _, ex := range j.ExcludeLabels {
				if in.Kind == "exact" && ex.Kind == "exact" && in.Value == ex.Value {
					f.errorf(n, "%s: label %q is both required and excluded", what, in.Value)
				}
			}
		}
		return
	}
	j.RunsOn = f.labelList(n, what)
}

func isMappingValue(n ast.Node) bool {
	_, ok := n.(*ast.MappingValueNode)
	return ok
}

// labelList decodes label matchers: plain strings are exact labels, strings
// with glob syntax become RE2 regex matchers, {regex, flags} are regexes.
func (f *yfile) labelList(n ast.Node, what string) []LabelMatcher {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return []LabelMatcher{}
	}
	out := []LabelMatcher{}
	for _, it := range items {
		if s, ok := f.scalar(it); ok {
			switch {
			case strings.TrimSpace(s) == "":
				f.errorf(it, "%s: labels must be non-empty", what)
			case strings.HasPrefix(s, "!"):
				f.errorf(it, "%s: %q: negated labels are not allowed here; use runsOn: {labels: [...], exclude: [...]}", what, s)
			case pattern.IsGlob(s):
				src, err := pattern.LabelGlobRegex(s)
				if err != nil {
					f.errorf(it, "%s: %v", what, err)
					continue
				}
				if err := pattern.CheckSafeRegex(src, ""); err != nil {
					f.errorf(it, "%s: %v", what, err)
					continue
				}
				out = append(out, LabelMatcher{Kind: "regex", Source: src, Flags: ""})
			default:
				out = append(out, LabelMatcher{Kind: "exact", Value: s})
			}
			continue
		}
		entries, ok := f.mapping(it, what+" entries")
		if !ok {
			continue
		}
		f.strict(entries, what+" entry", "regex", "flags")
		m := LabelMatcher{Kind: "regex"}
		for _, e := range entries {
			switch e.key {
			case "regex":
				m.Source, _ = f.nonEmptyStr(e.val, what+" regex")
			case "flags":
				m.Flags, _ = f.str(e.val, what+" flags")
			}
		}
		if m.Source == "" {
			f.errorf(it, "%s: a regex label entry needs `regex`", what)
			continue
		}
		if err := pattern.CheckSafeRegex(m.Source, m.Flags); err != nil {
			f.errorf(it, "%s: %v", what, err)
			continue
		}
		out = append(out, m)
	}
	return out
}

func (f *yfile) needs(n ast.Node, what string) ([]Need, []needRef) {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return []Need{}, nil
	}
	out := []Need{}
	var refs []needRef
	seen := map[string]bool{}
	for _, it := range items {
		need := Need{RunOn: []status.Job{status.JobSuccess}}
		if s, ok := f.scalar(it); ok {
			need.Name = s
		} else {
			entries, ok := f.mapping(it, what+" entries")
			if !ok {
				continue
			}
			f.strict(entries, what+" entry", "job", "when")
			for _, e := range entries {
				switch e.key {
				case "job":
					need.Name, _ = f.nonEmptyStr(e.val, what+" job")
				case "when":
					need.RunOn = f.when(e.val, what+" when")
				}
			}
		}
		if need.Name == "" {
			f.errorf(it, "%s: entry needs a job name", what)
			continue
		}
		if seen[need.Name] {
			f.errorf(it, "%s: %q is listed twice", what, need.Name)
			continue
		}
		seen[need.Name] = true
		out = append(out, need)
		refs = append(refs, needRef{name: need.Name, node: it})
	}
	return out, refs
}

func (f *yfile) when(n ast.Node, what string) []status.Job {
	if s, ok := f.scalar(n); ok {
		set, known := whenKeywords[s]
		if !known {
			f.errorf(n, "%s must be on-success, always, on-failure, on-skip or a list of statuses, got %q", what, s)
			return []status.Job{status.JobSuccess}
		}
		return slices.Clone(set)
	}
	list, ok := f.strList(n, what)
	if !ok {
		return []status.Job{status.JobSuccess}
	}
	if len(list) == 0 {
		f.errorf(n, "%s: the status list must not be empty", what)
		return []status.Job{status.JobSuccess}
	}
	out := make([]status.Job, len(list))
	for i, s := range list {
		out[i] = status.Job(s)
		if !out[i].IsTerminal() {
			f.errorf(n, "%s: %q is not a terminal job status (%s)", what, s, strings.Join(status.Strings(status.TerminalJobs()), ", "))
		}
	}
	return out
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
		j.Matrix = &Matrix{Type: "static", Values: raw}
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
		j.Matrix = &Matrix{Type: "static", Values: json.RawMessage(buf.String())}
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

func (f *yfile) steps(n ast.Node, what string) []Step {
	items, ok := f.sequence(n, what+" steps", false)
	if !ok {
		return []Step{}
	}
	if len(items) == 0 {
		f.errorf(n, "%s has an empty steps list", what)
		return []Step{}
	}
	steps := []Step{}
	seen := map[string]ast.Node{}
	unnamed := 0
	for i, it := range items {
		sw := fmt.Sprintf("%s step %d", what, i+1)
		entries, ok := f.mapping(it, sw)
		if !ok {
			continue
		}
		f.strict(entries, "step", "name", "run", "shell", "env", "workingDirectory", "timeout", "retry", "continueOnError", "when", "attest", "secrets", "if")
		line, col := nodePos(f.resolve(it))
		s := Step{SourceLocation: &Location{File: f.path, Line: line, Column: col}}
		var nameNode ast.Node
		hasRun := false
		for _, e := range entries {
			switch e.key {
			case "name":
				nameNode = e.val
				s.Name, _ = f.nonEmptyStr(e.val, sw+" name")
			case "run":
				hasRun = true
				s.Run, _ = f.nonEmptyStr(e.val, sw+" run")
			case "shell":
				s.Shell, _ = f.nonEmptyStr(e.val, sw+" shell")
			case "env":
				s.Env = f.envMap(e.val, sw+" env")
			case "workingDirectory":
				if d, ok := f.nonEmptyStr(e.val, sw+" workingDirectory"); ok {
					if msg := checkWorkDir(d); msg != "" {
						f.errorf(e.val, "%s workingDirectory %q %s", sw, d, msg)
					}
					s.WorkingDirectory = d
				}
			case "timeout":
				s.Timeout, _ = f.duration(e.val, sw+" timeout")
			case "retry":
				s.Retry = f.retry(e.val, sw+" retry")
			case "continueOnError":
				s.ContinueOnError, _ = f.boolean(e.val, sw+" continueOnError")
			case "when":
				s.RunOn = f.stepWhen(e.val, sw+" when")
			case "attest":
				s.Attest = f.attestPaths(e.val, sw+" attest")
			case "secrets":
				s.Secrets = f.secretMap(e.val, sw+" secrets")
			case "if":
				s.If = f.stepCondition(e.val, steps, sw+" if")
			}
		}
		if !hasRun {
			f.errorf(it, "%s has no `run` command", sw)
		}
		if nameNode == nil {
			unnamed++
			s.Name = fmt.Sprintf("step-%d", unnamed)
			nameNode = it
		}
		if s.Name != "" {
			if _, dup := seen[s.Name]; dup {
				f.errorf(nameNode, "%s: duplicate step name %q", what, s.Name)
			}
			seen[s.Name] = nameNode
		}
		steps = append(steps, s)
	}
	return steps
}

func checkWorkDir(d string) string {
	if filepath.IsAbs(d) || strings.HasPrefix(d, "/") || strings.HasPrefix(d, "\\") {
		return "must be relative to the checkout"
	}
	for _, part := range strings.FieldsFunc(d, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return "must not leave the checkout (..)"
		}
	}
	return ""
}

// retry decodes `retry: N` (N attempts, KiCI defaults: 1s delay,
// exponential backoff, 30s max delay) or {maxAttempts, delay, backoff,
// maxDelay}.
func (f *yfile) retry(n ast.Node, what string) *Retry {
	rt := &Retry{MaxAttempts: 1, DelayMs: 1000, Backoff: "exponential", MaxDelayMs: 30000}
	if in, ok := f.resolve(n).(*ast.IntegerNode); ok {
		v, ok := f.intRange(in, what, 1, 10)
		if !ok {
			return nil
		}
		rt.MaxAttempts = v
		return rt
	}
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	f.strict(entries, what, "maxAttempts", "delay", "backoff", "maxDelay")
	hasMax := false
	for _, e := range entries {
		switch e.key {
		case "maxAttempts":
			rt.MaxAttempts, _ = f.intRange(e.val, what+" maxAttempts", 1, 10)
			hasMax = true
		case "delay":
			rt.DelayMs, _ = f.duration(e.val, what+" delay")
		case "maxDelay":
			rt.MaxDelayMs, _ = f.duration(e.val, what+" maxDelay")
		case "backoff":
			if s, ok := f.str(e.val, what+" backoff"); ok {
				if s != "fixed" && s != "exponential" {
					f.errorf(e.val, "%s backoff must be fixed or exponential, got %q", what, s)
				}
				rt.Backoff = s
			}
		}
	}
	if !hasMax {
		f.errorf(n, "%s needs maxAttempts (1..10)", what)
	}
	return rt
}
