package trigger

import (
	"encoding/json"
	"testing"

	"kici.dev/kici/internal/lockfile"
)

// FuzzJSONPathFilter: any match/not object over any document either fails
// to compile with an error or evaluates without panicking, for both a
// kici_event and a generic_webhook trigger.
func FuzzJSONPathFilter(f *testing.F) {
	f.Add([]byte(`{"$.env":"prod"}`), []byte(`{"env":"prod"}`))
	f.Add([]byte(`{"$.tags[*]":["a","b"]}`), []byte(`{"tags":["b"]}`))
	f.Add([]byte(`{"$..x":"/^v\\d+/i"}`), []byte(`{"a":{"x":"V1"}}`))
	f.Add([]byte(`{"$.items[?@.n > 2].k":null}`), []byte(`{"items":[{"n":3,"k":null}]}`))
	f.Add([]byte(`{"env":{"a":1}}`), []byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, filter, doc []byte) {
		if _, err := CompileJSONPathFilter(filter); err != nil {
			return
		}
		var payload any
		if json.Unmarshal(doc, &payload) != nil {
			return
		}
		w := &lockfile.Workflow{Name: "w", Triggers: []lockfile.Trigger{
			{Type: "kici_event", EventName: "e", Match: filter, Not: filter},
			{Type: "generic_webhook", CommentOn: "s", Match: filter},
		}}
		d1 := MatchWorkflow(w, KiciEvent("e", payload, "", ""))
		if ev, err := GenericEvent("s", "default", doc); err == nil {
			d2 := MatchWorkflow(w, ev)
			if _, err := json.Marshal([]Decision{d1, d2}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
