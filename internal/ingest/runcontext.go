package ingest

import (
	"encoding/json"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// eventRunContext is what a run's conditions see beyond the run row: the
// event's changed files and, when the matched trigger declares inputs (a
// dispatch or schedule trigger), their values: the event payload's
// `inputs` (a forge dispatch), coerced to the declared types, over the
// declared defaults. Inputs the payload gives but the trigger does not
// declare are dropped; a value that does not coerce keeps the default.
// Every other input the workflow declares (all of them for a push or a
// pull request) has its default or its type's zero value
// (lockfile.WithInputDefaults), so a condition on an input means the same
// on every run instead of failing on a missing value.
func eventRunContext(wf *lockfile.Workflow, dec trigger.Decision, ev *trigger.Event) *store.RunContext {
	rc := &store.RunContext{ChangedPaths: ev.ChangedFiles}
	defer func() { rc.Inputs = lockfile.WithInputDefaults(wf, rc.Inputs) }()
	if dec.MatchedTrigger == nil || *dec.MatchedTrigger >= len(wf.Triggers) {
		return rc
	}
	t := wf.Triggers[*dec.MatchedTrigger]
	if len(t.Inputs) == 0 {
		return rc
	}
	var ds map[string]lockfile.InputDescriptor
	if json.Unmarshal(t.Inputs, &ds) != nil {
		return rc
	}
	given, _ := ev.Payload["inputs"].(map[string]any)
	rc.Inputs = map[string]any{}
	for name, d := range ds {
		if v, ok := given[name]; ok {
			if c, err := d.Coerce(v); err == nil {
				rc.Inputs[name] = c
				continue
			}
		}
		if d.HasDefault {
			if c, err := d.Coerce(d.Default); err == nil {
				rc.Inputs[name] = c
			}
		}
	}
	return rc
}
