package trigger

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
)

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func kev(t *testing.T, name, payload, repo string) Event {
	return *KiciEvent(name, obj(t, payload), repo, "github:1")
}

func gev(t *testing.T, source, event, body string) Event {
	t.Helper()
	ev, err := GenericEvent(source, event, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return *ev
}

// TestKiciEventSection38 is the kici_event rows of KiCI's matcher tests.
func TestKiciEventSection38(t *testing.T) {
	ke := func(match, not, source string) lockfile.Trigger {
		tr := lockfile.Trigger{Type: "kici_event", EventName: "deploy-complete", CommentOn: source}
		if match != "" {
			tr.Match = json.RawMessage(match)
		}
		if not != "" {
			tr.Not = json.RawMessage(not)
		}
		return tr
	}
	runCases(t, []matchCase{
		{"name matches", ke("", "", ""), kev(t, "deploy-complete", `{}`, "org/a"), true},
		{"other name", ke("", "", ""), kev(t, "build-started", `{}`, "org/a"), false},
		{"match env prod vs staging", ke(`{"$.env":"prod"}`, "", ""), kev(t, "deploy-complete", `{"env":"staging"}`, ""), false},
		{"not env staging vs prod", ke("", `{"$.env":"staging"}`, ""), kev(t, "deploy-complete", `{"env":"prod"}`, ""), true},
		{"source differs", ke("", "", "org/repo-a"), kev(t, "deploy-complete", `{}`, "org/repo-b"), false},
		{"source same", ke("", "", "org/repo-a"), kev(t, "deploy-complete", `{}`, "org/repo-a"), true},
		{"status+not deployed prod", ke(`{"$.status":"deployed"}`, `{"$.env":"dev"}`, ""), kev(t, "deploy-complete", `{"status":"deployed","env":"prod"}`, ""), true},
		{"status+not deployed dev", ke(`{"$.status":"deployed"}`, `{"$.env":"dev"}`, ""), kev(t, "deploy-complete", `{"status":"deployed","env":"dev"}`, ""), false},
		{"status+not pending prod", ke(`{"$.status":"deployed"}`, `{"$.env":"dev"}`, ""), kev(t, "deploy-complete", `{"status":"pending","env":"prod"}`, ""), false},
		{"wrong type", ke("", "", ""), push("main"), false},
	})
}

// TestJSONPathSection38 is the JSONPath rows of KiCI's matcher tests, run through a
// kici_event trigger (match/not apply to payload.payload).
func TestJSONPathSection38(t *testing.T) {
	m := func(match string) lockfile.Trigger {
		return lockfile.Trigger{Type: "kici_event", EventName: "e", Match: json.RawMessage(match)}
	}
	n := func(not string) lockfile.Trigger {
		return lockfile.Trigger{Type: "kici_event", EventName: "e", Not: json.RawMessage(not)}
	}
	ev := func(p string) Event { return kev(t, "e", p, "") }
	runCases(t, []matchCase{
		{"number equal", m(`{"$.n":42}`), ev(`{"n":42}`), true},
		{"number vs string", m(`{"$.n":42}`), ev(`{"n":"42"}`), false},
		{"string vs number", m(`{"$.n":"42"}`), ev(`{"n":42}`), false},
		{"bool true", m(`{"$.b":true}`), ev(`{"b":true}`), true},
		{"bool vs string", m(`{"$.b":true}`), ev(`{"b":"true"}`), false},
		{"null equals null", m(`{"$.x":null}`), ev(`{"x":null}`), true},
		{"null vs missing", m(`{"$.x":null}`), ev(`{}`), false},
		{"null vs false", m(`{"$.x":null}`), ev(`{"x":false}`), false},
		{"wildcard tags", m(`{"$.tags[*]":"deploy"}`), ev(`{"tags":["ci","deploy","prod"]}`), true},
		{"wildcard tags none", m(`{"$.tags[*]":"release"}`), ev(`{"tags":["ci","deploy","prod"]}`), false},
		{"array expected", m(`{"$.env":["prod","staging"]}`), ev(`{"env":"staging"}`), true},
		{"array expected miss", m(`{"$.env":["prod","staging"]}`), ev(`{"env":"dev"}`), false},
		{"regex literal", m(`{"$.version":"/^v\\d+\\./"}`), ev(`{"version":"v2.3.1"}`), true},
		{"regex literal miss", m(`{"$.version":"/^v\\d+\\./"}`), ev(`{"version":"2.3.1"}`), false},
		{"regex i flag", m(`{"$.status":"/^deployed$/i"}`), ev(`{"status":"DEPLOYED"}`), true},
		{"regex without i", m(`{"$.status":"/^deployed$/"}`), ev(`{"status":"DEPLOYED"}`), false},
		{"regex only on strings", m(`{"$.n":"/^4/"}`), ev(`{"n":42}`), false},
		{"object expected never matches", m(`{"$.o":{"a":1}}`), ev(`{"o":{"a":1}}`), false},
		{"missing path in match", m(`{"$.nope":"x"}`), ev(`{"env":"prod"}`), false},
		{"missing path in not", n(`{"$.nope":"x"}`), ev(`{"env":"prod"}`), true},
		{"not two keys, first matches", n(`{"$.a":"1","$.b":"2"}`), ev(`{"a":"1","b":"x"}`), false},
		{"not two keys, second matches", n(`{"$.a":"1","$.b":"2"}`), ev(`{"a":"x","b":"2"}`), false},
		{"not two keys, none match", n(`{"$.a":"1","$.b":"2"}`), ev(`{"a":"x","b":"y"}`), true},
		{"match two keys, both", m(`{"$.a":"1","$.b":"2"}`), ev(`{"a":"1","b":"2"}`), true},
		{"match two keys, one", m(`{"$.a":"1","$.b":"2"}`), ev(`{"a":"1","b":"x"}`), false},
		{"empty match passes", m(`{}`), ev(`{}`), true},
		{"path without $", m(`{"env":"prod"}`), ev(`{"env":"prod"}`), true},
		{"nested path", m(`{"$.deploy.target.region":"eu"}`), ev(`{"deploy":{"target":{"region":"eu"}}}`), true},
		{"filter expression", m(`{"$.items[?@.kind == 'svc'].name":"api"}`), ev(`{"items":[{"kind":"db","name":"pg"},{"kind":"svc","name":"api"}]}`), true},
		{"invalid path fails, no panic", m(`{"$[":"x"}`), ev(`{}`), false},
		{"lookahead regex fails, no panic", m(`{"$.a":"/(?=x)/"}`), ev(`{"a":"x"}`), false},
	})
}

// TestGenericWebhookSection38 is the generic_webhook rows of KiCI's matcher tests.
func TestGenericWebhookSection38(t *testing.T) {
	gw := func(events []string, match, not string) lockfile.Trigger {
		tr := lockfile.Trigger{Type: "generic_webhook", CommentOn: "my-service", Events: events}
		if match != "" {
			tr.Match = json.RawMessage(match)
		}
		if not != "" {
			tr.Not = json.RawMessage(not)
		}
		return tr
	}
	full := gw([]string{"deploy", "rollback"}, `{"$.env":"prod"}`, `{"$.dryRun":true}`)
	runCases(t, []matchCase{
		{"source matches", gw(nil, "", ""), gev(t, "my-service", "default", `{}`), true},
		{"other source", gw(nil, "", ""), gev(t, "other-service", "default", `{}`), false},
		{"body cannot spoof source", gw(nil, "", ""), gev(t, "other-service", "default", `{"source":"my-service"}`), false},
		{"eventType test", gw([]string{"deploy", "rollback"}, "", ""), gev(t, "my-service", "default", `{"eventType":"test"}`), false},
		{"eventType deploy", gw([]string{"deploy", "rollback"}, "", ""), gev(t, "my-service", "default", `{"eventType":"deploy"}`), true},
		{"no eventType, action deploy", gw([]string{"deploy", "rollback"}, "", ""), gev(t, "my-service", "deploy", `{}`), true},
		{"no eventType, default action", gw([]string{"deploy"}, "", ""), gev(t, "my-service", "default", `{}`), false},
		{"combined all pass", full, gev(t, "my-service", "deploy", `{"env":"prod","dryRun":false}`), true},
		{"combined wrong source", full, gev(t, "x", "deploy", `{"env":"prod","dryRun":false}`), false},
		{"combined wrong event", full, gev(t, "my-service", "test", `{"env":"prod","dryRun":false}`), false},
		{"combined match fails", full, gev(t, "my-service", "deploy", `{"env":"dev","dryRun":false}`), false},
		{"combined not fails", full, gev(t, "my-service", "deploy", `{"env":"prod","dryRun":true}`), false},
		{"match on whole payload", gw(nil, `{"$.source":"my-service"}`, ""), gev(t, "my-service", "default", `{}`), true},
	})
}

// TestInternalEventsSection38 covers the lifecycle-style rows with the
// constructors the orchestrator uses to emit the events.
func TestInternalEventsSection38(t *testing.T) {
	runCases(t, []matchCase{
		{"workflow_complete CI cancelled", lockfile.Trigger{Type: "workflow_complete", Name: "CI", Status: []string{"success", "failed"}}, *WorkflowCompleteEvent("CI", "cancelled", "o/r", nil), false},
		{"workflow_complete Deploy success", lockfile.Trigger{Type: "workflow_complete", Name: "CI", Status: []string{"success", "failed"}}, *WorkflowCompleteEvent("Deploy", "success", "o/r", nil), false},
		{"workflow_complete CI success", lockfile.Trigger{Type: "workflow_complete", Name: "CI", Status: []string{"success", "failed"}}, *WorkflowCompleteEvent("CI", "success", "o/r", map[string]any{"status": "overridden?"}), true},
		{"job_complete skipped", lockfile.Trigger{Type: "job_complete", Status: []string{"success", "failed"}}, *JobCompleteEvent("CI", "test", "skipped", "o/r", nil), false},
		{"job_complete combined job differs", lockfile.Trigger{Type: "job_complete", Workflow: "CI", Job: "test", Status: []string{"success"}}, *JobCompleteEvent("CI", "build", "success", "o/r", nil), false},
		{"job_complete combined", lockfile.Trigger{Type: "job_complete", Workflow: "CI", Job: "test", Status: []string{"success"}}, *JobCompleteEvent("CI", "test", "success", "o/r", nil), true},
		{"schedule exact", lockfile.Trigger{Type: "schedule", CronExpression: "0 * * * *"}, *ScheduleEvent("0 * * * *", "r1", time.Now()), true},
		{"schedule differs", lockfile.Trigger{Type: "schedule", CronExpression: "0 * * * *"}, *ScheduleEvent("0 0 * * *", "r1", time.Now()), false},
		{"lifecycle", lockfile.Trigger{Type: "lifecycle", Events: []string{"workflow_complete", "job_failed"}}, *LifecycleEvent("job_failed", "o/r", nil), true},
		{"lifecycle sources other", lockfile.Trigger{Type: "lifecycle", Events: []string{"job_failed"}, Sources: []string{"org/deploy-repo"}}, *LifecycleEvent("job_failed", "org/other-repo", nil), false},
		{"lifecycle sources empty", lockfile.Trigger{Type: "lifecycle", Events: []string{"job_failed"}, Sources: []string{}}, *LifecycleEvent("job_failed", "org/other-repo", nil), true},
		{"fork always", lockfile.Trigger{Type: "fork"}, Event{Type: "fork"}, true},
		{"watch started", lockfile.Trigger{Type: "watch", Actions: []string{"started"}}, Event{Type: "watch", Action: "started"}, true},
		{"star created", lockfile.Trigger{Type: "star", Actions: []string{"created"}}, Event{Type: "star", Action: "created"}, true},
		{"review_comment action", lockfile.Trigger{Type: "review_comment", Actions: []string{"created"}}, Event{Type: "review_comment", Action: "edited"}, false},
		{"create tag pattern", lockfile.Trigger{Type: "create", RefTypes: []string{"tag"}, Patterns: glob("v*")}, Event{Type: "create", Payload: map[string]any{"ref_type": "tag", "ref": "v1"}}, true},
		{"delete release-*", lockfile.Trigger{Type: "delete", Patterns: glob("release-*")}, Event{Type: "delete", Payload: map[string]any{"ref_type": "branch", "ref": "release-1"}}, true},
	})
}

// TestJSONPathTrace checks the trace entries a JSONPath filter leaves.
func TestJSONPathTrace(t *testing.T) {
	w := wf(lockfile.Trigger{Type: "kici_event", EventName: "e", Match: json.RawMessage(`{"$.env":"prod"}`), Not: json.RawMessage(`{"$.dry":true}`)})
	ev := KiciEvent("e", map[string]any{"env": "prod", "dry": true}, "", "")
	d := MatchWorkflow(w, ev)
	if d.Matched {
		t.Fatalf("matched: %+v", d)
	}
	var names []string
	for _, c := range d.Checks {
		names = append(names, c.Check)
	}
	if got := strings.Join(names, ","); got != "event type,event name,jsonpath match,jsonpath not" {
		t.Fatalf("checks = %s", got)
	}
	last := d.Checks[3]
	if last.Pattern != "$.dry: true" || last.Value != "true" || last.Passed || last.Reason == "" {
		t.Fatalf("not check = %+v", last)
	}
}

func TestCompileJSONPathFilterErrors(t *testing.T) {
	for _, raw := range []string{`[1]`, `"x"`, `{"$[":1}`, `{"$.a":"/(?<=x)y/"}`, `{"$.a":"/a\\1/"}`, `{"":1}`} {
		if _, err := CompileJSONPathFilter(json.RawMessage(raw)); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
	for _, raw := range []string{``, `null`, `{}`, `{"env":"x"}`, `{"$..name":"x"}`} {
		if _, err := CompileJSONPathFilter(json.RawMessage(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// TestMissingSourceBranchTrace: a pr trigger with sourceBranches
// fails on an event without a source branch, with trace value (missing).
func TestMissingSourceBranchTrace(t *testing.T) {
	d := MatchWorkflow(wf(lockfile.Trigger{Type: "pr", SourceBranches: glob("feature/*")}), &Event{Type: "pull_request", Action: "opened", TargetBranch: "main"})
	last := d.Checks[len(d.Checks)-1]
	if d.Matched || last.Check != "source branch" || last.Value != "(missing)" || last.Passed {
		t.Fatalf("source branch check = %+v", last)
	}
}
