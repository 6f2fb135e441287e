package ingest

import (
	"reflect"
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/trigger"
)

// TestEventRunContext: a run's context gets the event's changed files; a
// schedule trigger's declared inputs reach its runs with their defaults;
// a forge dispatch's payload inputs are typed by the declarations, with
// undeclared ones dropped and invalid ones falling back to the default; a
// push (its trigger declares no inputs) sees every declared input at its
// default, typed, and so does a scheduled or dispatched run for the inputs
// only the other trigger declares.
func TestEventRunContext(t *testing.T) {
	lf, err := lockfile.Compile([]lockfile.SourceFile{{Path: ".kici/workflows/ci.yaml", Source: []byte(`on:
  schedule:
    cron: "0 3 * * *"
    inputs:
      level: {type: enum, values: [quick, full], default: full}
      n: {type: number, default: 2}
  dispatch:
    inputs:
      dry: {type: boolean, default: true}
      count: {type: integer, default: 1}
  push: {}
jobs:
  a: {run: x}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	wf := &lf.Workflows[0]
	at := func(i int) trigger.Decision { return trigger.Decision{Matched: true, MatchedTrigger: &i} }

	rc := eventRunContext(wf, at(0), &trigger.Event{Type: "schedule"})
	if want := map[string]any{"level": "full", "n": 2.0, "dry": true, "count": 1.0}; !reflect.DeepEqual(rc.Inputs, want) {
		t.Errorf("schedule inputs = %v, want %v", rc.Inputs, want)
	}
	rc = eventRunContext(wf, at(1), &trigger.Event{Type: "dispatch", Payload: map[string]any{
		"inputs": map[string]any{"dry": "false", "count": "many", "extra": "x"}}})
	if want := map[string]any{"dry": false, "count": 1.0, "level": "full", "n": 2.0}; !reflect.DeepEqual(rc.Inputs, want) {
		t.Errorf("dispatch inputs = %v, want %v", rc.Inputs, want)
	}
	rc = eventRunContext(wf, at(2), &trigger.Event{Type: "push", ChangedFiles: []string{"a.go"}})
	want := map[string]any{"level": "full", "n": 2.0, "dry": true, "count": 1.0}
	if !reflect.DeepEqual(rc.Inputs, want) || !reflect.DeepEqual(rc.ChangedPaths, []string{"a.go"}) {
		t.Errorf("push context = %+v", rc)
	}
}
