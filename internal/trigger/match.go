package trigger

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/trigger/pattern"
)

// missing is the trace value for an absent event field (KiCI).
const missing = "(missing)"

// matcherFunc evaluates one trigger kind's checks (after the event type
// check) and reports whether all passed.
type matcherFunc func(t *lockfile.Trigger, ev *Event, tr *tracer) bool

// kinds maps a trigger `_type` to the event type it requires and its checks.
// To support a new kind, add an entry here.
var kinds = map[string]struct {
	eventType Kind
	match     matcherFunc
}{
	"push":              {KindPush, matchPush},
	"pr":                {KindPullRequest, matchPR},
	"tag":               {KindTag, matchTag},
	"comment":           {KindComment, matchComment},
	"review":            {KindReview, matchReview},
	"review_comment":    {KindReviewComment, matchActionRepo},
	"release":           {KindRelease, matchActionRepo},
	"star":              {KindStar, matchActionRepo},
	"watch":             {KindWatch, matchActionRepo},
	"dispatch":          {KindDispatch, matchDispatch},
	"create":            {KindCreate, matchCreateDelete},
	"delete":            {KindDelete, matchCreateDelete},
	"status":            {KindStatus, matchStatus},
	"workflow_run":      {KindWorkflowRun, matchWorkflowRun},
	"fork":              {KindFork, matchRepoOnly},
	"schedule":          {KindSchedule, matchSchedule},
	"workflow_complete": {KindWorkflowComplete, matchWorkflowComplete},
	"job_complete":      {KindJobComplete, matchJobComplete},
	"lifecycle":         {KindLifecycle, matchLifecycle},
	"kici_event":        {KindKiciEvent, matchKiciEvent},
	"generic_webhook":   {KindGenericWebhook, matchGenericWebhook},
}

// MatchWorkflow evaluates wf's triggers in order against ev; the first
// passing trigger wins (KiCI). It never panics on bad patterns: an
// invalid glob or regex fails its check with the compile error as reason.
func MatchWorkflow(wf *lockfile.Workflow, ev *Event) Decision {
	d := Decision{Name: wf.Name, Checks: []Check{}}
	if len(wf.Triggers) == 0 {
		d.Summary = "No triggers defined"
		return d
	}
	for i := range wf.Triggers {
		t := &wf.Triggers[i]
		tr := &tracer{}
		if matchTrigger(t, ev, tr) {
			idx := i
			d.Matched = true
			d.MatchedTrigger = &idx
			d.Checks = tr.checks
			d.Summary = fmt.Sprintf("Matched trigger %d (%s)", i+1, t.Type)
			return d
		}
		d.Checks = append(d.Checks, tr.checks...)
	}
	d.Summary = "No triggers matched"
	return d
}

// MatchAll returns one decision per workflow of lf, in lock order.
func MatchAll(lf *lockfile.LockFile, ev *Event) []Decision {
	out := make([]Decision, 0, len(lf.Workflows))
	for i := range lf.Workflows {
		out = append(out, MatchWorkflow(&lf.Workflows[i], ev))
	}
	return out
}

// NeedsChangedFiles reports whether any trigger of lf filters on paths, in
// which case the caller must fetch the event's changed files (KiCI
// anyTriggerHasPathPatterns).
func NeedsChangedFiles(lf *lockfile.LockFile) bool {
	for _, wf := range lf.Workflows {
		for _, t := range wf.Triggers {
			if (t.Type == "push" || t.Type == "pr") && len(t.Paths) > 0 {
				return true
			}
		}
	}
	return false
}

func matchTrigger(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	if t.Type == "webhook" {
		// webhook: the raw event name must be one of events.
		if !tr.add("event type", strings.Join(t.Events, "|"), string(ev.Type), slices.Contains(t.Events, string(ev.Type)), "event type not in events") {
			return false
		}
		return checkAction(t.Actions, ev, tr) && checkRepos(t.Repos, ev, tr)
	}
	k, ok := kinds[t.Type]
	if !ok {
		tr.add("event type", t.Type, string(ev.Type), false, "trigger type not supported yet")
		return false
	}
	if !tr.add("event type", string(k.eventType), string(ev.Type), ev.Type == k.eventType, "event type differs") {
		return false
	}
	return k.match(t, ev, tr)
}

// tracer accumulates checks.
type tracer struct{ checks []Check }

// add records a check and returns passed. reason is kept only on failure.
func (tr *tracer) add(check, pat, value string, passed bool, reason string) bool {
	c := Check{Check: check, Pattern: pat, Value: value, Passed: passed}
	if !passed {
		c.Reason = reason
	}
	tr.checks = append(tr.checks, c)
	return passed
}

func orMissing(s string) string {
	if s == "" {
		return missing
	}
	return s
}

// checkList passes when list is empty or contains value.
func checkList(tr *tracer, check string, list []string, value string) bool {
	if len(list) == 0 {
		return tr.add(check, "", value, true, "")
	}
	ok := value != "" && slices.Contains(list, value)
	return tr.add(check, strings.Join(list, "|"), orMissing(value), ok, fmt.Sprintf("%s %s not in [%s]", check, orMissing(value), strings.Join(list, ", ")))
}

func checkAction(actions []string, ev *Event, tr *tracer) bool {
	return checkList(tr, "action", actions, ev.Action)
}

// checkPatterns passes when pats is empty or any pattern matches value
// (branch/tag/ref lists are ORed; KiCI).
func checkPatterns(tr *tracer, check string, pats []lockfile.Pattern, value string, valuePresent bool) bool {
	if len(pats) == 0 {
		return tr.add(check, "", value, true, "")
	}
	text := patternText(pats)
	if !valuePresent {
		return tr.add(check, text, missing, false, check+" is missing")
	}
	for _, p := range pats {
		ok, err := matchPattern(p, value)
		if err != nil {
			return tr.add(check, text, value, false, err.Error())
		}
		if ok {
			return tr.add(check, text, value, true, "")
		}
	}
	return tr.add(check, text, value, false, fmt.Sprintf("%s %s does not match %s", check, value, text))
}

func patternText(pats []lockfile.Pattern) string {
	parts := make([]string, len(pats))
	for i, p := range pats {
		if p.Type == lockfile.PatternRegex {
			parts[i] = "/" + p.Pattern + "/" + p.Flags
		} else {
			parts[i] = p.Pattern
		}
	}
	return strings.Join(parts, "|")
}

// matchPattern matches one glob or regex pattern.
func matchPattern(p lockfile.Pattern, value string) (bool, error) {
	switch p.Type {
	case lockfile.PatternGlob:
		g, err := compileGlob(p.Pattern)
		if err != nil {
			return false, err
		}
		return g.Match(value), nil
	case lockfile.PatternRegex:
		re, err := compileRegex(p.Pattern, p.Flags)
		if err != nil {
			return false, err
		}
		return re.MatchString(value), nil
	}
	return false, fmt.Errorf("unknown pattern type %q", p.Type)
}

// checkPaths implements matchPathPatterns (KiCI).
func checkPaths(paths []string, files []string, tr *tracer) bool {
	if len(paths) == 0 {
		return tr.add("paths", "", fmt.Sprintf("%d files", len(files)), true, "")
	}
	var inc, exc []string
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(p, "!"); ok {
			exc = append(exc, rest)
		} else {
			inc = append(inc, p)
		}
	}
	text := fmt.Sprintf("include: [%s] exclude: [%s]", strings.Join(inc, ", "), strings.Join(exc, ", "))
	value := summarizeFiles(files)
	if len(files) == 0 {
		return tr.add("paths", text, value, false, "no changed files")
	}
	var remaining []string
	for _, f := range files {
		excluded := false
		for _, e := range exc {
			ok, err := matchPattern(lockfile.Pattern{Type: "glob", Pattern: e}, f)
			if err != nil {
				return tr.add("paths", text, value, false, err.Error())
			}
			if ok {
				excluded = true
				break
			}
		}
		if !excluded {
			remaining = append(remaining, f)
		}
	}
	if len(remaining) == 0 {
		return tr.add("paths", text, value, false, "every changed file is excluded")
	}
	if len(inc) == 0 {
		return tr.add("paths", text, value, true, "")
	}
	for _, f := range remaining {
		for _, i := range inc {
			ok, err := matchPattern(lockfile.Pattern{Type: "glob", Pattern: i}, f)
			if err != nil {
				return tr.add("paths", text, value, false, err.Error())
			}
			if ok {
				return tr.add("paths", text, value, true, "")
			}
		}
	}
	return tr.add("paths", text, value, false, "no changed file matches the include patterns")
}

func summarizeFiles(files []string) string {
	const show = 10
	if len(files) == 0 {
		return "(no changed files)"
	}
	if len(files) <= show {
		return strings.Join(files, ", ")
	}
	return strings.Join(files[:show], ", ") + fmt.Sprintf(", … (+%d more)", len(files)-show)
}

// checkRepos filters on ev.SourceRepo: exclusions ("!" prefix, glob or
// regex) first, then includes; an all-exclusion list matches everything
// else (KiCI).
func checkRepos(repos []lockfile.Pattern, ev *Event, tr *tracer) bool {
	if len(repos) == 0 {
		return true
	}
	text := patternText(repos)
	if ev.SourceRepo == "" {
		return tr.add("repo", text, missing, false, "event has no source repo")
	}
	var inc, exc []lockfile.Pattern
	for _, p := range repos {
		if rest, ok := strings.CutPrefix(p.Pattern, "!"); ok {
			p.Pattern = rest
			exc = append(exc, p)
		} else {
			inc = append(inc, p)
		}
	}
	for _, p := range exc {
		ok, err := matchPattern(p, ev.SourceRepo)
		if err != nil {
			return tr.add("repo", text, ev.SourceRepo, false, err.Error())
		}
		if ok {
			return tr.add("repo", text, ev.SourceRepo, false, "repo is excluded by !"+p.Pattern)
		}
	}
	if len(inc) == 0 {
		return tr.add("repo", text, ev.SourceRepo, true, "")
	}
	for _, p := range inc {
		ok, err := matchPattern(p, ev.SourceRepo)
		if err != nil {
			return tr.add("repo", text, ev.SourceRepo, false, err.Error())
		}
		if ok {
			return tr.add("repo", text, ev.SourceRepo, true, "")
		}
	}
	return tr.add("repo", text, ev.SourceRepo, false, "repo matches no pattern")
}

func matchPush(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	return checkPatterns(tr, "branch", t.Branches, ev.TargetBranch, true) &&
		checkPaths(t.Paths, ev.ChangedFiles, tr) &&
		checkRepos(t.Repos, ev, tr) &&
		checkGates(t, ev, tr)
}

func matchPR(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	return checkAction(t.Events, ev, tr) &&
		checkPatterns(tr, "target branch", t.TargetBranches, ev.TargetBranch, true) &&
		checkPatterns(tr, "source branch", t.SourceBranches, ev.SourceBranch, ev.SourceBranch != "") &&
		checkPaths(t.Paths, ev.ChangedFiles, tr) &&
		checkRepos(t.Repos, ev, tr) &&
		checkGates(t, ev, tr)
}

func matchTag(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	return checkPatterns(tr, "tag pattern", t.Patterns, ev.TargetBranch, true) &&
		checkRepos(t.Repos, ev, tr)
}

func matchComment(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	if !checkAction(t.Actions, ev, tr) {
		return false
	}
	if t.CommentOn != "" {
		issue, _ := payloadValue(ev.Payload, "issue").(map[string]any)
		_, isPR := issue["pull_request"]
		kind := "issue"
		if isPR {
			kind = "pr"
		}
		if !tr.add("source", t.CommentOn, kind, kind == t.CommentOn, "comment is on a "+kind) {
			return false
		}
	}
	if t.BodyMatch != nil {
		body, _ := payloadValue(ev.Payload, "comment", "body").(string)
		check := "bodyMatch (" + string(t.BodyMatch.Type) + ")"
		ok, err := matchPattern(*t.BodyMatch, body)
		reason := "comment body does not match"
		if err != nil {
			ok, reason = false, err.Error()
		}
		if !tr.add(check, patternText([]lockfile.Pattern{*t.BodyMatch}), body, ok, reason) {
			return false
		}
	}
	return checkRepos(t.Repos, ev, tr)
}

func matchReview(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	state, _ := payloadValue(ev.Payload, "review", "state").(string)
	return checkAction(t.Actions, ev, tr) &&
		checkList(tr, "state", t.States, state) &&
		checkRepos(t.Repos, ev, tr)
}

func matchActionRepo(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	return checkAction(t.Actions, ev, tr) && checkRepos(t.Repos, ev, tr)
}

func matchRepoOnly(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	return checkRepos(t.Repos, ev, tr)
}

func matchDispatch(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	return checkList(tr, "dispatch type", t.Types, ev.Action) && checkRepos(t.Repos, ev, tr)
}

func matchCreateDelete(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	refType, _ := payloadValue(ev.Payload, "ref_type").(string)
	ref, hasRef := payloadValue(ev.Payload, "ref").(string)
	return checkList(tr, "ref type", t.RefTypes, refType) &&
		checkPatterns(tr, "ref pattern", t.Patterns, ref, hasRef) &&
		checkRepos(t.Repos, ev, tr)
}

func matchStatus(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	ctx, _ := payloadValue(ev.Payload, "context").(string)
	state, _ := payloadValue(ev.Payload, "state").(string)
	if len(t.Contexts) > 0 {
		pats := make([]lockfile.Pattern, len(t.Contexts))
		for i, c := range t.Contexts {
			pats[i] = lockfile.Pattern{Type: "glob", Pattern: c}
		}
		if !checkPatterns(tr, "context", pats, ctx, ctx != "") {
			return false
		}
	}
	return checkList(tr, "state", t.States, state) && checkRepos(t.Repos, ev, tr)
}

func matchWorkflowRun(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	name, _ := payloadValue(ev.Payload, "workflow_run", "name").(string)
	concl, _ := payloadValue(ev.Payload, "workflow_run", "conclusion").(string)
	return checkAction(t.Actions, ev, tr) &&
		checkList(tr, "workflow name", t.Workflows, name) &&
		checkList(tr, "conclusion", t.Conclusions, concl) &&
		checkRepos(t.Repos, ev, tr)
}

func matchSchedule(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	cron, _ := payloadValue(ev.Payload, "cronExpression").(string)
	return tr.add("cron expression", t.CronExpression, orMissing(cron), cron == t.CronExpression, "cron expression differs")
}

// checkOptionalEqual skips when want is empty, else demands equality.
func checkOptionalEqual(tr *tracer, check, want, got string) bool {
	if want == "" {
		return true
	}
	return tr.add(check, want, orMissing(got), want == got, check+" differs")
}

func matchWorkflowComplete(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	wf, _ := payloadValue(ev.Payload, "workflowName").(string)
	status, _ := payloadValue(ev.Payload, "status").(string)
	src, _ := payloadValue(ev.Payload, "sourceRepo").(string)
	return checkOptionalEqual(tr, "workflow name", t.Name, wf) &&
		checkList(tr, "status", t.Status, status) &&
		checkOptionalEqual(tr, "source", t.CommentOn, src)
}

func matchJobComplete(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	wf, _ := payloadValue(ev.Payload, "workflowName").(string)
	job, _ := payloadValue(ev.Payload, "jobName").(string)
	status, _ := payloadValue(ev.Payload, "status").(string)
	src, _ := payloadValue(ev.Payload, "sourceRepo").(string)
	return checkOptionalEqual(tr, "workflow name", t.Workflow, wf) &&
		checkOptionalEqual(tr, "job name", t.Job, job) &&
		checkList(tr, "status", t.Status, status) &&
		checkOptionalEqual(tr, "source", t.CommentOn, src)
}

func matchLifecycle(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	le, _ := payloadValue(ev.Payload, "lifecycleEvent").(string)
	src, _ := payloadValue(ev.Payload, "sourceRepo").(string)
	return checkList(tr, "lifecycle event", t.Events, le) &&
		checkList(tr, "source", t.Sources, src)
}

// checkJSONPath compiles and evaluates a match (negate=false) or not
// (negate=true) filter; an invalid filter fails the check with the compile
// error (locks are validated at load, so only hand-built locks get here).
func checkJSONPath(raw []byte, doc any, negate bool, tr *tracer) bool {
	f, err := CompileJSONPathFilter(raw)
	if err != nil {
		check := "jsonpath match"
		if negate {
			check = "jsonpath not"
		}
		return tr.add(check, compactJSON(raw), "", false, err.Error())
	}
	return f.eval(doc, negate, tr)
}

// matchKiciEvent: payload.eventName == eventName → match on payload.payload
// → not on payload.payload → payload.sourceRepo == source (KiCI).
func matchKiciEvent(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	name, _ := payloadValue(ev.Payload, "eventName").(string)
	if !tr.add("event name", t.EventName, orMissing(name), name == t.EventName, "event name differs") {
		return false
	}
	inner := payloadValue(ev.Payload, "payload")
	src, _ := payloadValue(ev.Payload, "sourceRepo").(string)
	return checkJSONPath(t.Match, inner, false, tr) &&
		checkJSONPath(t.Not, inner, true, tr) &&
		checkOptionalEqual(tr, "source", t.CommentOn, src)
}

// matchGenericWebhook: payload.source == source (always) → payload.eventType
// (fallback action, then "") ∈ events → match / not on the whole payload
// (KiCI).
func matchGenericWebhook(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	src, _ := payloadValue(ev.Payload, "source").(string)
	if !tr.add("source", t.CommentOn, orMissing(src), src == t.CommentOn, "generic source differs") {
		return false
	}
	et, _ := payloadValue(ev.Payload, "eventType").(string)
	if et == "" {
		et = ev.Action
	}
	if len(t.Events) > 0 {
		ok := et != "" && slices.Contains(t.Events, et)
		if !tr.add("event type filter", strings.Join(t.Events, "|"), orMissing(et), ok, "event type not in events") {
			return false
		}
	}
	var doc any = ev.Payload
	if ev.Payload == nil {
		doc = map[string]any{}
	}
	return checkJSONPath(t.Match, doc, false, tr) && checkJSONPath(t.Not, doc, true, tr)
}

// payloadValue walks nested objects; nil when any step is missing.
func payloadValue(p map[string]any, path ...string) any {
	var cur any = p
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// Pattern caches: locks are re-read per delivery, so compiled patterns are
// reused. The caches are bounded; past the bound patterns are compiled per
// use.
const maxCached = 4096

var (
	cacheMu    sync.Mutex
	globCache  = map[string]*pattern.Glob{}
	regexCache = map[string]*regexp.Regexp{}
)

func compileGlob(p string) (*pattern.Glob, error) {
	cacheMu.Lock()
	g, ok := globCache[p]
	cacheMu.Unlock()
	if ok {
		return g, nil
	}
	g, err := pattern.CompileGlob(p)
	if err != nil {
		return nil, err
	}
	cacheMu.Lock()
	if len(globCache) < maxCached {
		globCache[p] = g
	}
	cacheMu.Unlock()
	return g, nil
}

func compileRegex(src, flags string) (*regexp.Regexp, error) {
	key := flags + "/" + src
	cacheMu.Lock()
	re, ok := regexCache[key]
	cacheMu.Unlock()
	if ok {
		return re, nil
	}
	re, err := pattern.CompileRegex(src, flags)
	if err != nil {
		return nil, err
	}
	cacheMu.Lock()
	if len(regexCache) < maxCached {
		regexCache[key] = re
	}
	cacheMu.Unlock()
	return re, nil
}
