package lockfile

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const allTriggersYAML = `name: all
on:
  - push: {branches: [main]}
  - pr: {events: [opened]}
  - tag: {patterns: ["v*"]}
  - comment: {actions: [created], on: pr, bodyMatch: ["/deploy*"]}
  - review: {states: [approved]}
  - review_comment: {actions: [created]}
  - release: {actions: [published]}
  - dispatch:
      types: [deploy]
      inputs:
        env: {type: enum, values: [prod, staging], default: staging}
        replicas: {type: integer, min: 1, max: 10, default: 2}
        dry: {type: boolean, optional: true}
  - create: {refTypes: [tag], patterns: ["v*"]}
  - delete: {refTypes: [branch]}
  - status: {contexts: ["ci/*"], states: [success]}
  - workflow_run: {workflows: [CI], conclusions: [success]}
  - fork
  - star: {actions: [created]}
  - watch: {actions: [started]}
  - webhook: {events: [deployment]}
  - schedule: {cron: "0 3 * * *", timezone: Europe/Paris}
  - kici_event: {name: deploy-complete, match: {"$.env": prod, "$.tags[*]": [a, b]}, not: {"$.dry": true}, source: org/app}
  - generic_webhook: {source: my-service, events: [deploy], match: {$.status: "/^ok$/i"}}
  - workflow_complete: {name: CI, status: [success, failed]}
  - job_complete: {workflow: CI, job: test, status: [skipped]}
  - lifecycle: {events: [job_failed], sources: [org/deploy]}
jobs:
  a:
    run: "true"
`

// TestCompileEveryTriggerKind compiles one workflow using every trigger
// kind and checks the lock entries, then reloads the lock with Parse.
func TestCompileEveryTriggerKind(t *testing.T) {
	lf, err := compileOne(t, allTriggersYAML)
	if err != nil {
		t.Fatal(err)
	}
	ts := lf.Workflows[0].Triggers
	var kinds []string
	for _, tr := range ts {
		kinds = append(kinds, tr.Type)
	}
	want := "push pr tag comment review review_comment release dispatch create delete status workflow_run fork star watch webhook schedule kici_event generic_webhook workflow_complete job_complete lifecycle"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("kinds = %s", got)
	}
	ke := ts[17]
	if ke.EventName != "deploy-complete" || ke.CommentOn != "org/app" || string(ke.Not) != `{"$.dry":true}` {
		t.Fatalf("kici_event = %+v (not %s)", ke, ke.Not)
	}
	var m map[string]any
	if err := json.Unmarshal(ke.Match, &m); err != nil || m["$.env"] != "prod" || len(m["$.tags[*]"].([]any)) != 2 {
		t.Fatalf("kici_event match = %s", ke.Match)
	}
	gw := ts[18]
	if gw.CommentOn != "my-service" || gw.Events[0] != "deploy" || string(gw.Match) != `{"$.status":"/^ok$/i"}` {
		t.Fatalf("generic_webhook = %+v", gw)
	}
	if ts[19].Name != "CI" || ts[20].Workflow != "CI" || ts[20].Job != "test" || ts[21].Sources[0] != "org/deploy" {
		t.Fatalf("complete/lifecycle = %+v %+v %+v", ts[19], ts[20], ts[21])
	}
	if ts[16].Timezone != "Europe/Paris" || ts[16].CronExpression != "0 3 * * *" {
		t.Fatalf("schedule = %+v", ts[16])
	}
	// dispatch inputs: defaults and validation
	in, err := ResolveInputs(ts[7].Inputs, map[string]any{"replicas": "3"})
	if err != nil || in["env"] != "staging" || in["replicas"] != float64(3) {
		t.Fatalf("inputs = %v, %v (descriptors %s)", in, err, ts[7].Inputs)
	}
	if _, ok := in["dry"]; ok {
		t.Fatalf("optional input without default got a value: %v", in)
	}
	for _, bad := range []map[string]any{{"replicas": "11"}, {"replicas": "1.5"}, {"env": "dev"}, {"nope": "x"}, {"dry": "maybe"}} {
		if _, err := ResolveInputs(ts[7].Inputs, bad); err == nil {
			t.Errorf("inputs %v accepted", bad)
		}
	}
	// the lock round-trips through Parse
	b, err := Encode(lf)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(compiled): %v", err)
	}
	var backMatch map[string]any
	if len(back.Workflows[0].Triggers) != len(ts) || json.Unmarshal(back.Workflows[0].Triggers[17].Match, &backMatch) != nil || backMatch["$.env"] != "prod" {
		t.Fatalf("round trip lost triggers: %s", back.Workflows[0].Triggers[17].Match)
	}
}

// TestCompileRejectsTriggerErrors: RE2-incompatible regexes, bad JSONPath
// and missing required fields are compile errors with a position.
func TestCompileRejectsTriggerErrors(t *testing.T) {
	for _, tc := range []struct{ on, want string }{
		{`push: {branches: [{regex: "^(?=main)"}]}`, "lookahead"},
		{`push: {branches: [{regex: "(a)\\1"}]}`, "backreferences"},
		{`pr: {sourceBranches: [{regex: "(?<!x)y"}]}`, "lookbehind"},
		{`comment: {bodyMatch: [{regex: "(?!no)"}]}`, "lookahead"},
		{`kici_event: {name: x, match: {"$[": 1}}`, "invalid JSONPath"},
		{`kici_event: {name: x, not: {$.a: "/(?=x)/"}}`, "lookahead"},
		{`kici_event: {match: {$.a: 1}}`, "needs `name`"},
		{`generic_webhook: {events: [x]}`, "needs `source`"},
		{`workflow_complete: {status: [done]}`, "not one of"},
		{`lifecycle: {events: [nope]}`, "not one of"},
		{`dispatch: {inputs: {n: {type: integer, default: "x"}}}`, "default"},
		{`dispatch: {inputs: {n: {type: color}}}`, "type must be one of"},
		{`kici_event: {name: x, match: [1]}`, "must be a mapping"},
	} {
		src := "name: w\non:\n  " + tc.on + "\njobs:\n  a:\n    run: \"true\"\n"
		_, err := compileOne(t, src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want %q", tc.on, err, tc.want)
		} else if !strings.Contains(err.Error(), "ci.yaml:3:") {
			t.Errorf("%s: error lacks a position: %v", tc.on, err)
		}
	}
}

// TestParseRejectsTriggerFilters: a hand-edited lock with an unsupported
// regex or JSONPath is rejected at load with the workflow and trigger named.
func TestParseRejectsTriggerFilters(t *testing.T) {
	head := `{"schemaVersion":29,"workflows":[{"name":"w","jobs":[],"triggers":[`
	for _, tc := range []struct{ trig, want string }{
		{`{"_type":"push","repos":[{"type":"regex","pattern":"^(?!evil)"}]}`, "lookahead"},
		{`{"_type":"push","branches":[{"type":"regex","pattern":"(x)\\1"}]}`, "backreferences"},
		{`{"_type":"kici_event","eventName":"e","match":{"$[":1}}`, "invalid JSONPath"},
		{`{"_type":"generic_webhook","source":"s","not":{"$.a":"/(?<=a)b/"}}`, "lookbehind"},
		{`{"_type":"kici_event","eventName":"e","match":[1]}`, "must be an object"},
		{`{"_type":"kici_event"}`, "needs eventName"},
		{`{"_type":"generic_webhook"}`, "needs source"},
		{`{"_type":"webhook","events":[]}`, "non-empty events"},
		{`{"_type":"status","contexts":["ci/[z-a]"]}`, "contexts"},
	} {
		_, err := Parse([]byte(head + tc.trig + `]}]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `workflow "w" trigger 1`) {
			t.Errorf("%s: error = %v, want %q", tc.trig, err, tc.want)
		}
	}
}

// TestCompileCron: schedules must be expressions the scheduler can fire.
func TestCompileCron(t *testing.T) {
	for _, ok := range []string{"0 3 * * 1", "*/5 * * * *", "@daily", "0 0 1 1 *"} {
		if _, err := compileOne(t, "on: {schedule: {cron: '"+ok+"'}}\njobs:\n  a: {run: x}\n"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"99 * * * *", "* * *", "0 0 30 2 * *", "every day", "0 0 * * 8"} {
		if _, err := compileOne(t, "on: {schedule: {cron: '"+bad+"'}}\njobs:\n  a: {run: x}\n"); err == nil || !strings.Contains(err.Error(), "not a cron expression") {
			t.Errorf("%s: error = %v", bad, err)
		}
	}
}

// TestCompilePushTags: push {tags} emits the push entry and a separate tag
// entry without repos (KiCI push({tags})).
func TestCompilePushTags(t *testing.T) {
	lf, err := compileOne(t, "on:\n  push: {tags: [\"v*\"], repos: [\"org/*\"]}\n  pr:\njobs:\n  a: {run: x}\n")
	if err != nil {
		t.Fatal(err)
	}
	ts := lf.Workflows[0].Triggers
	if len(ts) != 3 || ts[0].Type != "push" || len(ts[0].Branches) != 0 || len(ts[0].Repos) != 1 ||
		ts[1].Type != "tag" || len(ts[1].Patterns) != 1 || ts[1].Patterns[0].Pattern != "v*" || ts[1].Repos != nil || ts[2].Type != "pr" {
		t.Fatalf("triggers = %+v", ts)
	}
}

// TestCompileScheduleInputs: schedule inputs must have defaults or be
// optional (KiCI compile-time check).
func TestCompileScheduleInputs(t *testing.T) {
	if _, err := compileOne(t, "on: {schedule: {cron: '@daily', inputs: {env: {type: string, default: prod}, dry: {type: boolean, optional: true}}}}\njobs:\n  a: {run: x}\n"); err != nil {
		t.Fatal(err)
	}
	_, err := compileOne(t, "on: {schedule: {cron: '@daily', inputs: {env: {type: string}}}}\njobs:\n  a: {run: x}\n")
	if err == nil || !strings.Contains(err.Error(), "schedule.inputs.env needs a default") {
		t.Fatalf("error = %v", err)
	}
}

// Every declared input has a typed value in every run: what was given,
// else its default, else its type's zero value (nil when nullable).
func TestWithInputDefaults(t *testing.T) {
	lf, err := compileOne(t, `on:
  push: {}
  dispatch:
    inputs:
      repeat: {type: integer, default: 1}
      dry: {type: boolean, optional: true}
      note: {type: string, optional: true}
      level: {type: enum, values: [a, b], nullable: true, optional: true}
  schedule:
    cron: "0 3 * * *"
    inputs:
      ratio: {type: number, default: 0.5}
jobs:
  a: {run: x}
`)
	if err != nil {
		t.Fatal(err)
	}
	wf := &lf.Workflows[0]
	want := map[string]any{"repeat": 1.0, "dry": false, "note": "", "level": nil, "ratio": 0.5}
	if got := WithInputDefaults(wf, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("no inputs: %v, want %v", got, want)
	}
	want["repeat"] = 3.0
	if got := WithInputDefaults(wf, map[string]any{"repeat": 3.0}); !reflect.DeepEqual(got, want) {
		t.Errorf("given repeat: %v, want %v", got, want)
	}
	if got := InputTypes(wf.Triggers); got["repeat"] != "integer" || got["level"] != "" || got["ratio"] != "number" {
		t.Errorf("types %v", got)
	}
}
